/** Monthly check counters per API key, shared by the API and every proxy (contract §1.3). */
export interface QuotaCounter {
  used(tenantId: string, keyId: string, period: string): Promise<number>
}
