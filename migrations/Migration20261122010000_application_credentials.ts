import { Migration } from '@mikro-orm/migrations';

/** Application credentials ("API keys"), their roles and access rules. */
export class Migration20261122010000_application_credentials extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      create table application_credential (
        id varchar(64) primary key,
        name varchar(255) not null,
        user_id varchar(64) not null references identity_user (id) on delete cascade,
        project_id varchar(64) null references project (id) on delete cascade,
        secret_hash text not null,
        description text null,
        expires_at timestamptz null,
        unrestricted boolean null,
        created_at timestamptz not null,
        constraint application_credential_name_per_user unique (user_id, name)
      )`);
    this.addSql('create index application_credential_by_project on application_credential (project_id)');
    this.addSql(`
      create table application_credential_role (
        application_credential_id varchar(64) not null references application_credential (id) on delete cascade,
        role_id varchar(64) not null references role (id) on delete cascade,
        primary key (application_credential_id, role_id)
      )`);
    this.addSql(`
      create table access_rule (
        id varchar(64) primary key,
        user_id varchar(64) not null references identity_user (id) on delete cascade,
        service varchar(64) not null,
        path varchar(225) not null,
        method varchar(16) not null,
        constraint access_rule_unique_per_user unique (user_id, service, path, method)
      )`);
    this.addSql(`
      create table application_credential_access_rule (
        application_credential_id varchar(64) not null references application_credential (id) on delete cascade,
        access_rule_id varchar(64) not null references access_rule (id) on delete restrict,
        primary key (application_credential_id, access_rule_id)
      )`);
    this.addSql('create index access_rule_in_use on application_credential_access_rule (access_rule_id)');
  }
}
