import { randomBytes } from 'node:crypto';
import type { Application } from '../app.ts';
import { SYSTEM_TARGET_ID, type Role } from '../assignment/assignment-service.ts';
import { AuthenticationError } from '../support/errors.ts';
import { DEFAULT_DOMAIN_ID } from '../resource/resource-service.ts';

export interface BootstrapOptions {
  /** The admin's password; when absent a new admin gets a generated one. */
  adminPassword?: string | undefined;
  /** Where clients reach this service: the identity endpoints of the catalog point here. */
  publicUrl: string;
  regionId?: string;
}

export interface BootstrapResult {
  /** Set only when this run generated the admin's password (print it once). */
  generatedAdminPassword?: string;
  /** What this run created or changed, for the log. */
  changes: string[];
}

const ROLE_NAMES = ['reader', 'member', 'admin'] as const;

/**
 * Keystone's `keystone-manage bootstrap`, idempotent: the Default domain, the admin/member/reader
 * roles (admin ⇒ member ⇒ reader), the admin project and user with admin on the project and the
 * system, and the identity service with endpoints at the public URL. Safe to run on every start.
 */
export async function bootstrap(app: Application, options: BootstrapOptions): Promise<BootstrapResult> {
  const changes: string[] = [];
  const regionId = options.regionId ?? 'RegionOne';

  if (!(await app.resources.findAny(DEFAULT_DOMAIN_ID))) {
    await app.resources.createDomain({ id: DEFAULT_DOMAIN_ID, name: 'Default', description: 'The default domain' });
    changes.push('created the Default domain');
  }

  const roles: Partial<Record<(typeof ROLE_NAMES)[number], Role>> = {};
  for (const name of ROLE_NAMES) {
    const [existing] = await app.assignments.listRoles({ name: [{ operator: 'equals', value: name }], domainId: null });
    roles[name] = existing ?? (await app.assignments.createRole({ name, options: { immutable: true } }));
    if (!existing) changes.push(`created role ${name}`);
  }
  await app.assignments.createImplication(roles.admin!.id, roles.member!.id);
  await app.assignments.createImplication(roles.member!.id, roles.reader!.id);

  let project = await app.resources.findProjectByName('admin', DEFAULT_DOMAIN_ID);
  if (!project) {
    project = await app.resources.createProject({ name: 'admin', domainId: DEFAULT_DOMAIN_ID, description: 'Bootstrap project for initializing the cloud.' });
    changes.push('created project admin');
  }

  let generatedAdminPassword: string | undefined;
  let [admin] = await app.identity.listUsers({ name: [{ operator: 'equals', value: 'admin' }], domainId: DEFAULT_DOMAIN_ID });
  if (!admin) {
    const password = options.adminPassword ?? randomBytes(18).toString('base64url');
    if (!options.adminPassword) generatedAdminPassword = password;
    admin = await app.identity.createUser(
      { name: 'admin', domainId: DEFAULT_DOMAIN_ID, password },
      { setBy: 'operator', generated: !options.adminPassword },
    );
    changes.push('created user admin');
  } else if (options.adminPassword) {
    // As Keystone's bootstrap: an explicitly given password wins over a changed one.
    try {
      await app.identity.authenticatePassword({ id: admin.id }, options.adminPassword);
    } catch (error) {
      if (!(error instanceof AuthenticationError)) throw error;
      await app.identity.updateUser(admin.id, { password: options.adminPassword, enabled: true }, { setBy: 'operator' });
      changes.push('reset the admin password to ADMIN_PASSWORD');
    }
  }

  await app.assignments.grant({ actorType: 'user', actorId: admin.id, targetType: 'project', targetId: project.id, roleId: roles.admin!.id });
  await app.assignments.grant({ actorType: 'user', actorId: admin.id, targetType: 'system', targetId: SYSTEM_TARGET_ID, roleId: roles.admin!.id });

  const regions = await app.catalog.listRegions({});
  if (!regions.some((region) => region.id === regionId)) {
    await app.catalog.createRegion({ id: regionId });
    changes.push(`created region ${regionId}`);
  }
  let [service] = await app.catalog.listServices({ type: 'identity' });
  if (!service) {
    service = await app.catalog.createService({ type: 'identity', name: 'keystone' });
    changes.push('created the identity service');
  }
  const url = `${options.publicUrl.replace(/\/+$/, '')}/v3`;
  const endpoints = await app.catalog.listEndpoints({ serviceId: service.id });
  for (const endpointInterface of ['public', 'internal', 'admin'] as const) {
    const existing = endpoints.find((endpoint) => endpoint.interface === endpointInterface && (endpoint.regionId ?? null) === regionId);
    if (!existing) {
      await app.catalog.createEndpoint({ serviceId: service.id, interface: endpointInterface, url, regionId });
      changes.push(`created the ${endpointInterface} identity endpoint ${url}`);
    } else if (existing.url !== url) {
      // Keep the catalog pointing at where this service is reached now.
      await app.catalog.updateEndpoint(existing.id, { url });
      changes.push(`moved the ${endpointInterface} identity endpoint to ${url}`);
    }
  }
  return { ...(generatedAdminPassword ? { generatedAdminPassword } : {}), changes };
}
