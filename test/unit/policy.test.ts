import { Ajv } from 'ajv';
import { describe, expect, it } from 'vitest';
import { budgetsOf, decide, duplicateRuleIds, evaluatePolicy, POLICY_SCHEMA, type PolicyDocument, type ToolCallFacts } from '../../src/domain/policy.js';

const policy: PolicyDocument = {
  version: 1,
  default: 'allow',
  rules: [
    { id: 'no-deletes', tools: ['db.delete'], decision: 'block', reason: 'deletes are not allowed' },
    { id: 'big-payments', tools: ['payments.*'], when: { args: { amount: { gt: 100 } } }, decision: 'require_approval' },
    { id: 'foreign', tools: ['payments.transfer'], when: { args: { 'to.country': { ne: 'TW' } } }, decision: 'require_approval' },
    { id: 'admin-tools', tools: ['*'], when: { permission_levels: ['ADMIN'] }, decision: 'require_approval' },
    { id: 'intern', tools: ['email.send'], when: { agents: ['intern-agent'] }, decision: 'block' },
    { id: 'acme-steps', tools: ['gate'], when: { tenants: ['acme'], actions: ['contract_step'] }, decision: 'block' },
  ],
};

const facts = (over: Partial<ToolCallFacts>): ToolCallFacts => ({ tool: 'weather.query', args: {}, agentId: 'a1', permissionLevel: 'PUBLIC', tenantId: 'default', action: 'tool_call', ...over });

describe('policy evaluation', () => {
  it.each([
    [facts({ tool: 'db.delete' }), 'block', 'no-deletes'],
    [facts({ tool: 'payments.transfer', args: { amount: 101, to: { country: 'TW' } } }), 'require_approval', 'big-payments'],
    [facts({ tool: 'payments.transfer', args: { amount: 100, to: { country: 'TW' } } }), 'allow', 'default'],
    [facts({ tool: 'payments.transfer', args: { amount: 5, to: { country: 'JP' } } }), 'require_approval', 'foreign'],
    [facts({ tool: 'payments.refund', args: { amount: '500' } }), 'allow', 'default'], // a string is not > 100
    [facts({ tool: 'ops.restart', permissionLevel: 'ADMIN' }), 'require_approval', 'admin-tools'],
    [facts({ tool: 'email.send', agentId: 'intern-agent' }), 'block', 'intern'],
    [facts({ tool: 'email.send', agentId: 'senior-agent' }), 'allow', 'default'],
    // A contract step's capability `tool.gate` matches rules on `gate`; tenant and action narrow a rule.
    [facts({ tool: 'tool.gate', tenantId: 'acme', action: 'contract_step' }), 'block', 'acme-steps'],
    [facts({ tool: 'tool.gate', tenantId: 'other', action: 'contract_step' }), 'allow', 'default'],
    [facts({ tool: 'gate', tenantId: 'acme', action: 'tool_call' }), 'allow', 'default'],
    [facts({ tool: 'tool.db.delete', action: 'contract_step' }), 'block', 'no-deletes'],
  ])('decides %j', (f, decision, ruleId) => {
    expect(evaluatePolicy(policy, f)).toMatchObject({ decision, ruleId, policyVersion: 1 });
  });

  it('lets the first matching rule win', () => {
    const first = evaluatePolicy({ ...policy, rules: [{ id: 'a', tools: ['*'], decision: 'block' }, ...policy.rules] }, facts({ tool: 'db.delete' }));
    expect(first.ruleId).toBe('a');
  });

  it('has a schema that accepts the document and names what is wrong with a bad one', () => {
    const validate = new Ajv({ strict: true }).compile(POLICY_SCHEMA);
    expect(validate(policy)).toBe(true);
    expect(validate({ version: 1, default: 'maybe', rules: [] })).toBe(false);
    expect(validate.errors![0]).toMatchObject({ instancePath: '/default' });
    expect(validate({ version: 1, default: 'allow', rules: [{ id: 'x', tools: ['t'], decision: 'allow', when: { args: { amount: { bigger: 1 } } } }] })).toBe(false);
  });

  it('finds duplicate rule ids', () => {
    expect(duplicateRuleIds({ ...policy, rules: [...policy.rules, { id: 'intern', tools: ['x'], decision: 'allow' }] })).toEqual(['intern']);
  });
});

describe("a tenant's policy under the platform's", () => {
  const own: PolicyDocument = {
    version: 7,
    default: 'allow',
    rules: [
      { id: 'deletes-ok', tools: ['db.delete'], decision: 'allow' },
      { id: 'ask-email', tools: ['email.send'], decision: 'require_approval' },
      { id: 'no-weather', tools: ['weather.query'], decision: 'block' },
    ],
  };

  it.each([
    // The platform's block stands whatever the tenant says.
    ['db.delete', 'block', 'no-deletes', 'platform', 1],
    // The tenant tightens what the platform allows.
    ['email.send', 'require_approval', 'ask-email', 'tenant', 7],
    ['weather.query', 'block', 'no-weather', 'tenant', 7],
    // A tie is recorded as the tenant's.
    ['calendar.read', 'allow', 'default', 'tenant', 7],
  ] as const)('%s: %s by %s (%s)', (tool, decision, ruleId, policyScope, policyVersion) => {
    expect(decide({ platform: policy, tenant: own }, facts({ tool }))).toEqual(expect.objectContaining({ decision, ruleId, policyScope, policyVersion }));
  });

  it("is the platform's alone until the tenant stores one", () => {
    expect(decide({ platform: policy }, facts({ tool: 'email.send' }))).toMatchObject({ decision: 'allow', policyScope: 'platform' });
  });

  it('keeps the smaller of each budget', () => {
    const platform: PolicyDocument = { ...policy, budgets: { run_tokens: 1000, tenants: { acme: { tenant_tokens_per_day: 50_000 } } } };
    const tenant: PolicyDocument = { ...own, budgets: { run_tokens: 5000, tenant_tokens_per_day: 20_000 } };
    expect(budgetsOf({ platform, tenant }, 'acme')).toEqual({ run_tokens: 1000, tenant_tokens_per_day: 20_000 });
    expect(budgetsOf({ platform }, 'acme')).toMatchObject({ run_tokens: 1000, tenant_tokens_per_day: 50_000 });
    expect(budgetsOf({ platform: own, tenant }, 'globex')).toEqual({ run_tokens: 5000, tenant_tokens_per_day: 20_000 });
  });
});
