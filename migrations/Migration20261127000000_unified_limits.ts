import { Migration } from '@mikro-orm/migrations';

/**
 * Keystone's unified limits: registered limits (a service's default for a resource, per region or for
 * every region) and limits (a project's or a domain's own value for one).
 *
 * As in Keystone: a project's or a domain's limits go with it (on delete cascade); a service or a
 * region deleted leaves its registered limits and limits as they are (no foreign key: Keystone 22
 * keeps them), and a limit refers to its registered limit by (service, region, resource), which the
 * service keeps fixed while limits refer to it. Uniqueness treats "no region" as one region.
 */
export class Migration20261127000000_unified_limits extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      create table registered_limit (
        id varchar(64) primary key,
        service_id varchar(255) not null,
        region_id varchar(255) null,
        resource_name varchar(255) not null,
        default_limit integer not null,
        description text null
      )`);
    this.addSql(`create unique index registered_limit_unique on registered_limit (service_id, coalesce(region_id, ''), resource_name)`);

    this.addSql(`
      create table "limit" (
        id varchar(64) primary key,
        project_id varchar(64) null references project (id) on delete cascade,
        domain_id varchar(64) null references project (id) on delete cascade,
        service_id varchar(255) not null,
        region_id varchar(255) null,
        resource_name varchar(255) not null,
        resource_limit integer not null,
        description text null,
        check ((project_id is null) <> (domain_id is null))
      )`);
    this.addSql(
      `create unique index limit_unique on "limit" (coalesce(project_id, ''), coalesce(domain_id, ''), service_id, coalesce(region_id, ''), resource_name)`,
    );
    this.addSql(`create index limit_by_project on "limit" (project_id)`);
    this.addSql(`create index limit_by_domain on "limit" (domain_id)`);
    this.addSql(`create index limit_by_registered on "limit" (service_id, resource_name)`);
  }
}
