import { Migration } from '@mikro-orm/migrations';

export class Migration20261123120000 extends Migration {
  override async up(): Promise<void> {
    // A ticket is the execution of a business contract; "execution contract" is seed 004's alone.
    this.addSql('alter table "contract_executions" rename to "tickets"');
    this.addSql('alter table "tickets" rename constraint "contract_executions_pkey" to "tickets_pkey"');
    this.addSql('alter table "tickets" rename constraint "uq_contract_executions_idempotency" to "uq_tickets_idempotency"');
    this.addSql('alter index "idx_contract_executions_expiry" rename to "idx_tickets_expiry"');
    this.addSql('alter index "idx_contract_executions_lease" rename to "idx_tickets_lease"');
    this.addSql('alter table "contract_steps" rename to "ticket_steps"');
    this.addSql('alter table "ticket_steps" rename constraint "contract_steps_pkey" to "ticket_steps_pkey"');
    this.addSql('create table "contract_versions" ("contract_id" varchar(128) not null, "version" varchar(32) not null, "intent" varchar(128) not null, "definition" jsonb not null, "created_at" timestamptz not null default now(), primary key ("contract_id", "version"))');
    this.addSql('create or replace function "contract_versions_contract_versions_immutable_fn"() returns trigger as $$ begin RAISE EXCEPTION \'contract versions are immutable\' USING ERRCODE = \'check_violation\'; end; $$ language plpgsql');
    this.addSql('create trigger "contract_versions_immutable" BEFORE UPDATE OR DELETE on "contract_versions" for each ROW execute function "contract_versions_contract_versions_immutable_fn"()');
  }

  override async down(): Promise<void> {
    this.addSql('drop table if exists "contract_versions" cascade');
    this.addSql('drop function if exists "contract_versions_contract_versions_immutable_fn"');
    this.addSql('alter table "ticket_steps" rename constraint "ticket_steps_pkey" to "contract_steps_pkey"');
    this.addSql('alter table "ticket_steps" rename to "contract_steps"');
    this.addSql('alter index "idx_tickets_lease" rename to "idx_contract_executions_lease"');
    this.addSql('alter index "idx_tickets_expiry" rename to "idx_contract_executions_expiry"');
    this.addSql('alter table "tickets" rename constraint "uq_tickets_idempotency" to "uq_contract_executions_idempotency"');
    this.addSql('alter table "tickets" rename constraint "tickets_pkey" to "contract_executions_pkey"');
    this.addSql('alter table "tickets" rename to "contract_executions"');
  }
}
