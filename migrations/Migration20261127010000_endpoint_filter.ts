import { Migration } from '@mikro-orm/migrations';

/**
 * OS-EP-FILTER: endpoints and endpoint groups associated with projects. Keystone drops a project's
 * associations when the project is deleted and an endpoint's when the endpoint is deleted (catalog
 * callbacks); here the foreign keys do it. An endpoint group's filters name a service or region by
 * value only (Keystone keeps a group whose service is gone), so they are not foreign keys.
 */
export class Migration20261127010000_endpoint_filter extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      create table project_endpoint (
        endpoint_id varchar(64) not null references endpoint (id) on delete cascade,
        project_id varchar(64) not null references project (id) on delete cascade,
        primary key (endpoint_id, project_id)
      )`);
    this.addSql('create index project_endpoint_by_project on project_endpoint (project_id)');
    this.addSql(`
      create table endpoint_group (
        id varchar(64) primary key,
        name varchar(255) not null,
        description text null,
        filters jsonb not null
      )`);
    this.addSql(`
      create table project_endpoint_group (
        endpoint_group_id varchar(64) not null references endpoint_group (id) on delete cascade,
        project_id varchar(64) not null references project (id) on delete cascade,
        primary key (endpoint_group_id, project_id)
      )`);
    this.addSql('create index project_endpoint_group_by_project on project_endpoint_group (project_id)');
  }
}
