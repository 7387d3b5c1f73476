// The portfolio store behind `input.portfolio_ref`, its tables, and its import.
import type { PackDb, PackMigration } from '../../src/ports/pack.js';
import type { PositionInput } from './valuation.js';

export interface PortfolioDoc {
  portfolio_id: string;
  account_id?: string;
  name: string;
  base_currency: string;
  positions: PositionInput[];
}

/** The pack's tables. `if not exists`: databases made before packs already have them. */
export const MIGRATIONS: PackMigration[] = [
  {
    name: '001_portfolios',
    sql: [
      'create table if not exists "portfolios" ("portfolio_id" varchar(128) not null, "account_id" varchar(128) null, "name" varchar(256) not null, "base_currency" varchar(3) not null, "updated_at" timestamptz not null default now(), primary key ("portfolio_id"))',
      'create table if not exists "portfolio_positions" ("portfolio_id" varchar(128) not null, "asset_id" varchar(64) not null, "asset_type" varchar(16) not null, "quantity" double precision not null, "cost_basis" double precision null, "market_value" double precision null, "currency" varchar(3) null, primary key ("portfolio_id", "asset_id"))',
    ],
  },
];

/** Replaces each portfolio and its positions, in one transaction. */
export async function importPortfolios(db: PackDb, portfolios: PortfolioDoc[]): Promise<number> {
  await db.transaction(async (tx) => {
    for (const p of portfolios) {
      if (!p.portfolio_id || !Array.isArray(p.positions)) throw new Error('each portfolio needs portfolio_id and positions');
      await tx.query(
        `INSERT INTO portfolios (portfolio_id, account_id, name, base_currency) VALUES (?, ?, ?, ?)
         ON CONFLICT (portfolio_id) DO UPDATE SET account_id = excluded.account_id, name = excluded.name, base_currency = excluded.base_currency, updated_at = now()`,
        [p.portfolio_id, p.account_id ?? null, p.name ?? p.portfolio_id, p.base_currency ?? 'USD'],
      );
      await tx.query('DELETE FROM portfolio_positions WHERE portfolio_id = ?', [p.portfolio_id]);
      await tx.query(
        `INSERT INTO portfolio_positions (portfolio_id, asset_id, asset_type, quantity, cost_basis, market_value, currency)
         SELECT ?, x.asset_id, x.asset_type, x.quantity, x.cost_basis, x.market_value, x.currency
         FROM jsonb_to_recordset(?::jsonb) AS x(asset_id text, asset_type text, quantity float8, cost_basis float8, market_value float8, currency text)`,
        [p.portfolio_id, JSON.stringify(p.positions)],
      );
    }
  });
  return portfolios.length;
}

/** The positions of a stored portfolio, or undefined when it (or the account) does not match. */
export async function loadPortfolio(db: PackDb, portfolioId: string, accountId?: string): Promise<PortfolioDoc | undefined> {
  const [row] = await db.query<{ portfolio_id: string; account_id: string | null; name: string; base_currency: string }>('SELECT * FROM portfolios WHERE portfolio_id = ?', [portfolioId]);
  if (!row || (accountId && row.account_id !== accountId)) return undefined;
  const positions = await db.query<{ asset_id: string; asset_type: string; quantity: number; cost_basis: number | null; market_value: number | null; currency: string | null }>(
    'SELECT * FROM portfolio_positions WHERE portfolio_id = ? ORDER BY asset_id',
    [portfolioId],
  );
  return {
    portfolio_id: row.portfolio_id,
    ...(row.account_id && { account_id: row.account_id }),
    name: row.name,
    base_currency: row.base_currency,
    positions: positions.map((p) => ({
      asset_id: p.asset_id,
      asset_type: p.asset_type,
      quantity: p.quantity,
      ...(p.cost_basis !== null && { cost_basis: p.cost_basis }),
      ...(p.market_value !== null && { market_value: p.market_value }),
      ...(p.currency && { currency: p.currency }),
    })),
  };
}
