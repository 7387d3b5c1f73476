import { Migration } from '@mikro-orm/migrations';

export class Migration20261124011858 extends Migration {
  override async up(): Promise<void> {
    this.addSql("alter table \"tickets\" add \"event_seq\" int not null default 0");
    // Tickets from before the counter continue from their last event.
    this.addSql('update "tickets" t set "event_seq" = e.seq from (select "ticket", max("seq") as seq from "ticket_events" group by "ticket") e where e."ticket" = t."ticket"');
  }

  override async down(): Promise<void> {
    this.addSql("alter table \"tickets\" drop column \"event_seq\"");
  }
}
