// The approval state machine of seed 001 §8.3.
import { defineMachine } from './machine.js';

export const APPROVAL_STATES = ['PENDING', 'APPROVED', 'REJECTED', 'EXPIRED'] as const;
export type ApprovalState = (typeof APPROVAL_STATES)[number];
export type ApprovalTrigger = 'approve' | 'reject' | 'expire';

export const APPROVAL_MACHINE = defineMachine<ApprovalState, ApprovalTrigger>({
  name: 'approval',
  initial: 'PENDING',
  states: APPROVAL_STATES,
  transitions: {
    PENDING: { approve: 'APPROVED', reject: 'REJECTED', expire: 'EXPIRED' },
    APPROVED: {},
    REJECTED: {},
    EXPIRED: {},
  },
  actors: { approve: ['human'], reject: ['human'], expire: ['system'] },
  resumable: ['PENDING'],
});
