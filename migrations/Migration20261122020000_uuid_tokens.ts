import { Migration } from '@mikro-orm/migrations';

/** Persisted tokens for the deprecated uuid provider. */
export class Migration20261122020000_uuid_tokens extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      create table token (
        id varchar(64) primary key,
        payload jsonb not null,
        issued_at timestamptz not null,
        expires_at timestamptz not null
      )`);
    this.addSql('create index token_by_expiry on token (expires_at)');
  }
}
