import { Migration } from '@mikro-orm/migrations';

/**
 * Keystone's id_mapping: the public id of each user and group of a domain whose identity back end
 * keeps its own ids (an LDAP directory), written the first time the entity is seen. The public id is
 * sha256(domain_id + entity_type + local_id), so a row never changes; role assignments use it.
 */
export class Migration20261128000000_id_mapping extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      create table id_mapping (
        public_id varchar(64) primary key,
        domain_id varchar(64) not null,
        local_id varchar(255) not null,
        entity_type varchar(8) not null check (entity_type in ('user', 'group')),
        unique (domain_id, local_id, entity_type)
      )`);
    // A directory user (a public id, no identity_user row) may hold application credentials and
    // access rules, as in Keystone, whose tables have no foreign key to the user: the foreign keys
    // become a trigger that still removes a deleted SQL user's credentials and rules.
    this.addSql('alter table application_credential drop constraint application_credential_user_id_fkey');
    this.addSql('alter table access_rule drop constraint access_rule_user_id_fkey');
    this.addSql(`
      create function remove_application_credentials_of_user() returns trigger language plpgsql as $$
      begin
        delete from application_credential where user_id = old.id;
        delete from access_rule where user_id = old.id;
        return old;
      end $$`);
    this.addSql(`create trigger user_application_credentials after delete on identity_user
      for each row execute function remove_application_credentials_of_user()`);
  }
}
