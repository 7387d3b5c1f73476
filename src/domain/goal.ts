// What an execution is for, in one line.

/** A plan's goal (and an execution's original_goal): the intent and the contract it serves. */
export const goalOf = (input: { intent: string; contract?: { contract_id: string; version: string } }): string =>
  `${input.intent}${input.contract ? ` (${input.contract.contract_id}@${input.contract.version})` : ''}`;
