/**
 * Told after every committed change that affects decisions (policies, verbs, principals,
 * keys, the roster, grants). The implementation rebuilds the tenant's snapshot and
 * publishes it to the hot store before the API call returns (contract §1.2).
 */
export interface DecisionStateSink {
  changed(tenantId: string): Promise<void>
}
