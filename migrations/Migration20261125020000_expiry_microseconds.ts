import { Migration } from '@mikro-orm/migrations';

/**
 * Application credential expiry to the microsecond, as Keystone keeps it: the timestamptz column holds
 * the instant as written through a JS Date (milliseconds), this one the microseconds past them (0–999; null for rows written before it).
 */
export class Migration20261125020000_expiry_microseconds extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table application_credential add column expires_at_microseconds smallint null`);
  }
}
