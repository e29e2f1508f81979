import { Migration } from '@mikro-orm/migrations';

/**
 * Keystone's domain configuration (PUT /v3/domains/{id}/config): one row per option of a domain's
 * `identity` and `ldap` groups. Keystone keeps whitelisted and sensitive options in two tables
 * (whitelisted_config, sensitive_config); here one table with a `sensitive` flag (a sensitive option
 * is stored, never returned). A domain deleted takes its configuration (on delete cascade).
 */
export class Migration20261128010000_domain_config extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      create table domain_config_option (
        domain_id varchar(64) not null references project (id) on delete cascade,
        group_name varchar(255) not null,
        option_name varchar(255) not null,
        value jsonb null,
        sensitive boolean not null default false,
        primary key (domain_id, group_name, option_name)
      )`);
  }
}
