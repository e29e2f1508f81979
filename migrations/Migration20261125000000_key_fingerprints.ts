import { Migration } from '@mikro-orm/migrations';

/**
 * Fingerprints (HMACs under a fixed label, never the material) of the token keys and the secret
 * pepper the nodes of a deployment use, one row per kind: a node whose own keys or pepper do not
 * agree with them refuses to start instead of silently rejecting the other nodes' tokens.
 */
export class Migration20261125000000_key_fingerprints extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      create table key_fingerprint (
        name varchar(32) primary key,
        primary_fingerprint varchar(64) not null,
        staged_fingerprint varchar(64),
        fingerprints text not null,
        updated_at timestamptz not null default now()
      )`);
  }
}
