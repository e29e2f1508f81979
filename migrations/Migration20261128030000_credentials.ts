import { Migration } from '@mikro-orm/migrations';

/**
 * Keystone's credentials (/v3/credentials, OS-EC2): a blob kept encrypted (Fernet, with the
 * credential keys; key_hash names the primary key that encrypted it, so a rotation can tell which
 * blobs still need credential_migrate). No foreign keys, as in Keystone (a credential may name a
 * user or project that does not exist); deleting a user or a project deletes its credentials, as
 * Keystone's callbacks do, by trigger.
 */
export class Migration20261128030000_credentials extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      create table credential (
        id varchar(64) primary key,
        user_id varchar(64) not null,
        project_id varchar(64) null,
        type varchar(255) not null,
        encrypted_blob text not null,
        key_hash varchar(64) not null,
        extra jsonb not null default '{}'
      )`);
    this.addSql('create index credential_by_user on credential (user_id)');
    this.addSql('create index credential_by_project on credential (project_id)');
    this.addSql(`
      create function remove_credentials_of_user() returns trigger language plpgsql as $$
      begin
        delete from credential where user_id = old.id;
        return null;
      end $$`);
    this.addSql(`
      create function remove_credentials_of_project() returns trigger language plpgsql as $$
      begin
        delete from credential where project_id = old.id;
        return null;
      end $$`);
    this.addSql(`create trigger user_credentials after delete on identity_user
      for each row execute function remove_credentials_of_user()`);
    this.addSql(`create trigger project_credentials after delete on project
      for each row execute function remove_credentials_of_project()`);
  }
}
