import { Migration } from '@mikro-orm/migrations';

/**
 * One counter, bumped by every transaction that takes access away without a revocation event (a
 * role removed while others remain, a group membership or an implied role removed, a role deleted):
 * nodes that missed the change's Redis message notice the new value when they poll, and re-read roles.
 */
export class Migration20261125010000_access_epoch extends Migration {
  override async up(): Promise<void> {
    this.addSql(`create table access_epoch (id smallint primary key check (id = 1), value bigint not null)`);
    this.addSql(`insert into access_epoch (id, value) values (1, 0)`);
  }
}
