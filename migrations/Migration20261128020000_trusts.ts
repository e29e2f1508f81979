import { Migration } from '@mikro-orm/migrations';

/**
 * OS-TRUST: a trustor delegates some of its roles on a project to a trustee. Keystone soft-deletes a
 * trust (deleted_at) when it is deleted or its last use is consumed; a deleted trust is never read
 * again. Unknown attributes of the create body are kept (extra) and echoed back. Deleting the trustor, the trustee or the project removes the trust (Keystone's callbacks
 * soft-delete it), and a deleted role leaves the trusts that named it.
 */
export class Migration20261128020000_trusts extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      create table trust (
        id varchar(64) primary key,
        trustor_user_id varchar(64) not null references identity_user (id) on delete cascade,
        trustee_user_id varchar(64) not null references identity_user (id) on delete cascade,
        project_id varchar(64) null references project (id) on delete cascade,
        impersonation boolean not null,
        expires_at timestamptz null,
        remaining_uses integer null,
        redelegated_trust_id varchar(64) null,
        redelegation_count integer not null default 0,
        deleted_at timestamptz null,
        extra jsonb not null default '{}'
      )`);
    this.addSql('create index trust_by_trustor on trust (trustor_user_id)');
    this.addSql('create index trust_by_trustee on trust (trustee_user_id)');
    this.addSql(`
      create table trust_role (
        trust_id varchar(64) not null references trust (id) on delete cascade,
        role_id varchar(64) not null references role (id) on delete cascade,
        primary key (trust_id, role_id)
      )`);
  }
}
