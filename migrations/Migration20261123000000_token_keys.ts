import { Migration } from '@mikro-orm/migrations';

/**
 * Token signing keys kept in the database (KEY_ENCRYPTION_KEY set), so every node shares them.
 * Each key is AES-256-GCM encrypted; token_key_generation changes with every setup or rotation and
 * is what nodes poll, and its row is what concurrent rotations lock.
 */
export class Migration20261123000000_token_keys extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      create table token_key (
        provider varchar(16) not null,
        number integer not null,
        nonce bytea not null,
        ciphertext bytea not null,
        created_at timestamptz not null default now(),
        primary key (provider, number)
      )`);
    this.addSql(`
      create table token_key_generation (
        provider varchar(16) primary key,
        generation bigint not null
      )`);
  }
}
