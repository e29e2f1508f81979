import { Migration } from '@mikro-orm/migrations';

/**
 * Keystone's OS-FEDERATION resources, with Keystone's table and column names: identity providers
 * (each in a domain: deleting the domain deletes them, as Keystone's domain-deleted callback does),
 * their remote ids (unique across all providers), mapping rules, the protocols of a provider (its
 * deletion takes them), service providers, and the federated users shadowed at a federated login
 * (idp, protocol, unique id → a local user; deleting the protocol, the provider or the user takes
 * them). A protocol's mapping is not a foreign key: Keystone lets a mapping in use be deleted.
 */
export class Migration20261129000000_federation extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      create table identity_provider (
        id varchar(64) primary key,
        domain_id varchar(64) not null references project (id) on delete cascade,
        enabled boolean not null,
        description text null,
        authorization_ttl integer null
      )`);
    this.addSql('create index identity_provider_by_domain on identity_provider (domain_id)');
    this.addSql(`
      create table idp_remote_ids (
        remote_id varchar(255) primary key,
        idp_id varchar(64) not null references identity_provider (id) on delete cascade
      )`);
    this.addSql('create index idp_remote_ids_by_idp on idp_remote_ids (idp_id)');
    this.addSql(`
      create table mapping (
        id varchar(64) primary key,
        rules jsonb not null
      )`);
    this.addSql(`
      create table federation_protocol (
        id varchar(64) not null,
        idp_id varchar(64) not null references identity_provider (id) on delete cascade,
        mapping_id varchar(64) not null,
        remote_id_attribute varchar(64) null,
        primary key (id, idp_id)
      )`);
    this.addSql('create index federation_protocol_by_idp on federation_protocol (idp_id)');
    this.addSql(`
      create table service_provider (
        id varchar(64) primary key,
        enabled boolean not null,
        description text null,
        auth_url varchar(256) not null,
        sp_url varchar(256) not null,
        relay_state_prefix varchar(256) not null
      )`);
    this.addSql(`
      create table federated_user (
        id serial primary key,
        user_id varchar(64) not null references identity_user (id) on delete cascade,
        idp_id varchar(64) not null references identity_provider (id) on delete cascade,
        protocol_id varchar(64) not null,
        unique_id varchar(255) not null,
        display_name varchar(255) null,
        unique (idp_id, protocol_id, unique_id),
        foreign key (protocol_id, idp_id) references federation_protocol (id, idp_id) on delete cascade
      )`);
    this.addSql('create index federated_user_by_user on federated_user (user_id)');
  }
}
