import { Migration } from '@mikro-orm/migrations';

/**
 * The order of the long user and project lists (name, then id): each keyset page of GET /v3/users
 * or /v3/projects becomes a range read of this index instead of a sort of the whole table.
 */
export class Migration20261123010000_list_order_indexes extends Migration {
  override async up(): Promise<void> {
    this.addSql('create index user_by_name on identity_user (name, id)');
    this.addSql('create index project_by_name on project (name, id)');
  }
}
