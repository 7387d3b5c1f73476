// What each tenant sees of the tools table, read once and kept until a tool
// is written on any core (TOOLS_CHANNEL, which writeTool notifies) or the
// listener reconnects and may have missed that: the calls and plans that look
// tools up by name read no row each. A tenant's tools are read again after
// TOOLS_KEPT_MS all the same.
import type { EntityManager } from '@mikro-orm/postgresql';
import { notFound } from '../domain/errors.js';
import { TtlCache } from '../runtime/ttl-cache.js';
import { listTools, type ToolRow } from './tool-store.js';

const TOOLS_KEPT_MS = 5 * 60_000;
const TENANTS_KEPT = 10_000;

export class ToolCatalog {
  readonly #em: () => EntityManager;
  /** tenant -> its visible tools by name. */
  readonly #byTenant = new TtlCache<Map<string, ToolRow>>(TOOLS_KEPT_MS, TENANTS_KEPT);

  constructor(em: () => EntityManager) {
    this.#em = em;
  }

  /** The tools `tenantId` sees: its own, then the platform's under names it has not taken. */
  async list(tenantId: string): Promise<ToolRow[]> {
    return [...(await this.#of(tenantId)).values()];
  }

  /** A tool `tenantId` sees, as getTool finds it; NOT_FOUND when there is none. */
  async get(tenantId: string, name: string): Promise<ToolRow> {
    const tool = (await this.#of(tenantId)).get(name);
    if (!tool) throw notFound('tool', name);
    return tool;
  }

  /** Drops what was read: a tool was written here or on another core, or the listener reconnected. */
  forget(): void {
    this.#byTenant.clear();
  }

  #of(tenantId: string): Promise<Map<string, ToolRow>> {
    return this.#byTenant.getOrLoad(tenantId, async () => new Map((await listTools(this.#em(), tenantId)).map((t) => [t.name, t])));
  }
}
