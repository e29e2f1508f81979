import type { Constructor } from '@mikro-orm/core';
import type { Migration } from '@mikro-orm/migrations';
import { Migration20261122000000_initial } from './Migration20261122000000_initial.ts';
import { Migration20261122010000_application_credentials } from './Migration20261122010000_application_credentials.ts';
import { Migration20261122020000_uuid_tokens } from './Migration20261122020000_uuid_tokens.ts';
import { Migration20261123000000_token_keys } from './Migration20261123000000_token_keys.ts';
import { Migration20261123010000_list_order_indexes } from './Migration20261123010000_list_order_indexes.ts';
import { Migration20261125000000_key_fingerprints } from './Migration20261125000000_key_fingerprints.ts';
import { Migration20261125010000_access_epoch } from './Migration20261125010000_access_epoch.ts';
import { Migration20261125020000_expiry_microseconds } from './Migration20261125020000_expiry_microseconds.ts';
import { Migration20261127000000_policies } from './Migration20261127000000_policies.ts';
import { Migration20261127010000_endpoint_filter } from './Migration20261127010000_endpoint_filter.ts';
import { Migration20261127020000_unified_limits } from './Migration20261127020000_unified_limits.ts';
import { Migration20261128000000_id_mapping } from './Migration20261128000000_id_mapping.ts';
import { Migration20261128010000_domain_config } from './Migration20261128010000_domain_config.ts';
import { Migration20261128030000_credentials } from './Migration20261128030000_credentials.ts';
import { Migration20261128020000_trusts } from './Migration20261128020000_trusts.ts';
import { Migration20261128040000_oauth1 } from './Migration20261128040000_oauth1.ts';
import { Migration20261129000000_federation } from './Migration20261129000000_federation.ts';

/** Every migration, in order. The same list runs on PGlite and on PostgreSQL. */
export const migrations: { name: string; class: Constructor<Migration> }[] = [
  { name: 'Migration20261122000000_initial', class: Migration20261122000000_initial },
  { name: 'Migration20261122010000_application_credentials', class: Migration20261122010000_application_credentials },
  { name: 'Migration20261122020000_uuid_tokens', class: Migration20261122020000_uuid_tokens },
  { name: 'Migration20261123000000_token_keys', class: Migration20261123000000_token_keys },
  { name: 'Migration20261123010000_list_order_indexes', class: Migration20261123010000_list_order_indexes },
  { name: 'Migration20261125000000_key_fingerprints', class: Migration20261125000000_key_fingerprints },
  { name: 'Migration20261125010000_access_epoch', class: Migration20261125010000_access_epoch },
  { name: 'Migration20261125020000_expiry_microseconds', class: Migration20261125020000_expiry_microseconds },
  { name: 'Migration20261127000000_policies', class: Migration20261127000000_policies },
  { name: 'Migration20261127010000_endpoint_filter', class: Migration20261127010000_endpoint_filter },
  { name: 'Migration20261127020000_unified_limits', class: Migration20261127020000_unified_limits },
  { name: 'Migration20261128000000_id_mapping', class: Migration20261128000000_id_mapping },
  { name: 'Migration20261128010000_domain_config', class: Migration20261128010000_domain_config },
  { name: 'Migration20261128030000_credentials', class: Migration20261128030000_credentials },
  { name: 'Migration20261128020000_trusts', class: Migration20261128020000_trusts },
  { name: 'Migration20261128040000_oauth1', class: Migration20261128040000_oauth1 },
  { name: 'Migration20261129000000_federation', class: Migration20261129000000_federation },
];
