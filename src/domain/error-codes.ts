// The closed catalogue of ABC's error codes. Seed 001's surfaces (IM, agents,
// tools, approvals, LLM proxy, A2A, the HTTP boundary) use its lower_snake
// codes; seed 000's contract API and seed 002's engine use UPPER_SNAKE codes.
// No code exists in both cases. A code outside this list is a bug, except a
// webhook tool's own code, which is passed through as the tool said it.
// test/unit/error-codes.test.ts holds src/ to this list and docs/errors.md to it.

export const ERROR_CODES = {
  // The boundary and access (every surface).
  invalid_request: 'The request is malformed: a field is missing, of the wrong type or out of range (`details.field` or `details.pointer`).',
  unauthenticated: 'No credential, or one ABC does not know (API key or run token).',
  forbidden: 'The credential is valid but may not do this: a key without the scope (`details.scope`), a run token outside its run, a key speaking for a user it is not pinned to.',
  not_found: 'No such resource (route, run, session, agent, tool, tool call, approval), or one of another tenant.',
  body_too_large: 'The body is larger than the route allows.',
  request_too_large: 'An IM frame is larger than the WebSocket allows.',
  conflict: 'A concurrent writer won (deadlock or serialization failure); retry.',
  version_conflict: 'A context blob was changed since the version the caller read.',
  rate_limited: 'Too many requests for the key, the tenant or the address, or too many runs going for the tenant (`details.limit`); retry after `retry_after_seconds`.',
  database_unavailable: 'PostgreSQL cannot be reached; retry after `retry_after_seconds`.',
  core_unavailable: 'The gateway cannot reach a core.',
  internal_error: 'A bug in ABC. The trace id in the body finds it in the logs.',
  secret_unavailable: 'A tool names a secret (`details.secret`) its tenant does not have, or a version that has retired.',
  secret_unreadable: 'A sealed secret (an agent token) cannot be opened with this ABC_SECRET_KEY.',
  illegal_transition: "A state machine's table does not allow this move from the current state (`details.machine`, `from`, `trigger`).",
  cancelled: 'The work was cancelled.',
  // IM (seed 001 §5).
  already_authenticated: 'A second hello on one IM connection.',
  hello_timeout: 'The IM connection sent no valid hello in time.',
  client_offline: 'The client that should run a client-side tool is not connected.',
  stream_interrupted: "The agent's stream broke before `done`.",
  // Runs and agents.
  agent_error: 'The agent failed, timed out, is unknown or unhealthy, or answered outside the protocol (`details.reason`).',
  run_ended: 'The run has ended; its approvals are withdrawn and its tool calls will not start.',
  parent_run_ended: 'The calling run of an agent-to-agent call has ended.',
  a2a_cycle: 'An agent-to-agent call would call an agent already in its chain (`details.path`).',
  a2a_depth_exceeded: 'Agent-to-agent calls nest deeper than A2A_MAX_DEPTH.',
  // Tools and approvals.
  tool_failed: 'A tool failed; a webhook tool says why in `details.tool_error`.',
  tool_timeout: 'A tool did not answer within its timeout.',
  invalid_output: "A tool's result breaks its output schema, or is not JSON.",
  blocked: 'The policy blocked the tool call, LLM call (model) or agent-to-agent call (`details.rule_id`, `details.policy_version`, `details.policy_scope`: platform or tenant).',
  policy_version_conflict: "A policy stored over the API must have a version above every one its owner (the tenant, or the platform) stored (`details.stored_version`).",
  budget_exhausted: "A token budget of the policy is used up: the run's or the tenant's daily (`details.budget`, `limit`, `used`).",
  rejected: 'A human rejected the approval.',
  approval_timeout: 'Nobody decided the approval in time.',
  approval_conflict: 'The approval was already decided.',
  approval_args_mismatch: 'The arguments differ from those the approval was asked for.',
  idempotency_conflict: 'An idempotency key was used for a different request (tool calls and contract submits).',
  tool_call_finished: 'The tool call already has its result.',
  already_completed: 'The client tool result was already recorded.',
  not_a_client_tool: 'A tool result was sent for a tool that runs on the server.',
  // LLM proxy.
  llm_error: 'The LLM router failed after retries and fallbacks.',
  // Contract API (seed 000).
  SCHEMA_VIOLATION: 'The request breaks its contract schema (`details.pointer`, `details.violations`).',
  UNKNOWN_CONTRACT: 'No such contract id or version.',
  TICKET_NOT_FOUND: 'No such ticket, or it has expired.',
  TICKET_FINISHED: 'The ticket already finished; it cannot be cancelled.',
  TICKET_CANCELED: 'The ticket was cancelled before it finished.',
  SYNC_TIMEOUT: 'A sync submit did not finish within max_latency_ms; the execution continues under `details.ticket`.',
  ARTIFACT_NOT_READY: 'The ticket has no artifact until it has SUCCEEDED.',
  RESPONSE_SCHEMA_VIOLATION: 'ABC would have sent a document that breaks its schema; it sent this instead.',
  INVALID_CONTRACT: 'A contract definition cannot be registered (bad id, version or schema).',
  CONTRACT_VERSION_EXISTS: 'That contract version exists with other content; versions are immutable.',
  CONTRACT_NOT_ADDITIVE: 'A new version of a contract breaks its previous version within one major version (`details.changes`).',
  INTENT_TAKEN: 'Another contract owns that intent.',
  // Decision plane.
  INVALID_ASSEMBLY: 'An assembly definition is malformed (`details.pointer`).',
  ASSEMBLY_VERSION_EXISTS: 'That assembly version exists with other content.',
  NO_ASSEMBLY: 'No assembly serves the intent.',
  PLAN_NOT_FOUND: 'No such frozen plan.',
  UNKNOWN_STEP: 'The plan has no such step.',
  // Phase workflows (seed 003).
  INVALID_WORKFLOW: 'A workflow definition is malformed (`details.pointer`).',
  WORKFLOW_VERSION_EXISTS: 'That workflow version exists with other content; versions are immutable.',
  WORKFLOW_NOT_ADDITIVE: 'A new version within a major version removes a phase, a transition or changes the initial phase (`details.changes`).',
  WORKFLOW_NOT_FOUND: 'No such workflow (or version) for this tenant.',
  // Engine (seed 002) and execution units.
  NOT_WAITING_FOR_HUMAN: 'Human feedback for a ticket that is not in WAIT_HUMAN.',
  HUMAN_TIMEOUT: 'Nobody answered the human wait in time.',
  HUMAN_REJECTED: 'A human rejected the execution.',
  LOW_CONFIDENCE: 'The reviewer was not confident enough, and the policy halted.',
  NO_SNAPSHOT: 'A rollback found no snapshot to return to.',
  NO_EXECUTION_UNIT: 'Nothing serves a capability the plan names.',
  CAPABILITY_NOT_WHITELISTED: "A step asked for a capability outside the plan's whitelist.",
  POLICY_BLOCKED: 'The policy blocked a plan step (`details.rule_id`, `details.policy_version`, `details.policy_scope`); its capability was not called.',
  TOOL_PERMISSION_DENIED: "The STEP_EXECUTOR role may not call a tool of that permission level.",
  EXECUTOR_FAILED: 'The step executor could not bind a step to its call.',
  EXECUTOR_OFF_PLAN: 'The step executor asked for a capability the step does not plan.',
  STEP_FAILED: 'A step failed and nothing could repair it.',
  STEP_TIMEOUT: 'A step did not finish within its timeout.',
  STEP_CANCELLED: 'A step was stopped by a cancel.',
  STEP_INPUT_INVALID: "A step's bound input is not what its unit needs.",
  STEP_NOT_FOUND: 'No such step of the ticket.',
  DEPENDENCY_FAILED: 'Steps wait on steps that will not finish.',
  PLAN_CYCLE: "The plan's steps form a cycle.",
  PLAN_CHECK_FAILED: 'The plan critic found a violation (`metadata.violations`).',
  PLANNER_BAD_OUTPUT: 'The planner answered no plan.',
  OUTPUT_SCHEMA_VIOLATION: "A step's output breaks its output schema.",
  RESULT_SCHEMA_VIOLATION: "The aggregated result breaks the contract's result schema.",
  ROLE_AGENT_FAILED: 'An agent or LLM bound to an engine role failed.',
  AGENT_BAD_OUTPUT: 'An agent bound to an engine role answered outside the AgentOutput shape.',
  LLM_NOT_CONFIGURED: 'An LLM capability without LLM_ROUTER_URL.',
  LLM_BAD_OUTPUT: 'The LLM answered something the unit cannot use.',
} as const;

export type ErrorCode = keyof typeof ERROR_CODES;

export const isErrorCode = (code: string): code is ErrorCode => Object.hasOwn(ERROR_CODES, code);
