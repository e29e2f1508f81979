import { Migration } from '@mikro-orm/migrations';

/**
 * OS-OAUTH1: consumers, their request tokens and access tokens (Keystone's consumer, request_token
 * and access_token tables), and the nonces seen in signed requests. The secrets are kept encrypted
 * (HMAC-SHA1 verification needs them in plain text, so they cannot be hashed). Deleting a consumer
 * deletes its tokens, as Keystone's driver does; deleting a user or project deletes the access tokens
 * that delegate them.
 */
export class Migration20261128040000_oauth1 extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      create table oauth1_consumer (
        id varchar(64) primary key,
        description text null,
        secret text not null,
        extra jsonb not null
      )`);
    this.addSql(`
      create table oauth1_request_token (
        id varchar(64) primary key,
        secret text not null,
        verifier varchar(64) null,
        authorizing_user_id varchar(64) null,
        requested_project_id varchar(64) not null,
        role_ids jsonb null,
        consumer_id varchar(64) not null references oauth1_consumer (id) on delete cascade,
        expires_at timestamptz null
      )`);
    this.addSql('create index oauth1_request_token_by_consumer on oauth1_request_token (consumer_id)');
    this.addSql(`
      create table oauth1_access_token (
        id varchar(64) primary key,
        secret text not null,
        authorizing_user_id varchar(64) not null references identity_user (id) on delete cascade,
        project_id varchar(64) not null references project (id) on delete cascade,
        role_ids jsonb not null,
        consumer_id varchar(64) not null references oauth1_consumer (id) on delete cascade,
        expires_at timestamptz null
      )`);
    this.addSql('create index oauth1_access_token_by_user on oauth1_access_token (authorizing_user_id)');
    this.addSql('create index oauth1_access_token_by_consumer on oauth1_access_token (consumer_id)');
    this.addSql(`
      create table oauth1_nonce (
        consumer_id varchar(64) not null references oauth1_consumer (id) on delete cascade,
        nonce varchar(255) not null,
        timestamp bigint not null,
        primary key (consumer_id, nonce, timestamp)
      )`);
    this.addSql('create index oauth1_nonce_by_timestamp on oauth1_nonce (timestamp)');
  }
}
