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
  }
}
