/** Agent actions: an undo staged by an approval points at the action it undoes. */
export const up = /* sql */ `
alter table pending_actions add column revert_of text;
`
