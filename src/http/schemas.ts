import type { FastifySchemaCompiler, FastifySchemaValidationError } from 'fastify';
import { Type, type Static, type TSchema } from 'typebox';
import { Compile } from 'typebox/compile';

/**
 * Validates a request part against its schema, converting nothing: bodies must be JSON as sent
 * (Keystone does not coerce them), and query strings and path parameters are declared as the raw
 * strings they are (src/http/query.ts parses them as Keystone does). Unlike TypeBox's compiler for
 * fastify, a valid request costs only the compiled check: no conversion pass, no allocation.
 */
export const compileValidator: FastifySchemaCompiler<TSchema> = ({ schema }) => {
  const check = Compile(schema);
  return (value: unknown) => (check.Check(value) ? true : { error: check.Errors(value) as FastifySchemaValidationError[] });
};

// Request schemas follow Keystone's: create bodies allow extra attributes (stored and echoed back),
// updates need at least one property, booleans must be JSON booleans (no coercion of bodies).

const nullable = <T extends TSchema>(schema: T) => Type.Union([schema, Type.Null()]);

export const Id = Type.String({ minLength: 1, maxLength: 64, pattern: '^[a-zA-Z0-9-]+$' });
export const ProjectName = Type.String({ minLength: 1, maxLength: 64, pattern: '\\S' });
export const Name = Type.String({ minLength: 1, maxLength: 255, pattern: '\\S' });
export const Description = nullable(Type.String());
export const Url = Type.String({ minLength: 1, maxLength: 225, pattern: '^[a-zA-Z0-9+.\\-]+:.+' });
export const Tags = Type.Array(Type.String({ minLength: 1, maxLength: 255, pattern: '^[^,/]*$' }), { maxItems: 80, uniqueItems: true });
export const ResourceOptions = Type.Object({ immutable: Type.Optional(nullable(Type.Boolean())) }, { additionalProperties: false });

const optionalBoolean = Type.Optional(nullable(Type.Boolean()));
export const UserOptions = Type.Object(
  {
    ignore_change_password_upon_first_use: optionalBoolean,
    ignore_password_expiry: optionalBoolean,
    ignore_lockout_failure_attempts: optionalBoolean,
    lock_password: optionalBoolean,
    ignore_user_inactivity: optionalBoolean,
    multi_factor_auth_rules: Type.Optional(nullable(Type.Array(Type.Array(Type.String(), { minItems: 1, uniqueItems: true }), { uniqueItems: true }))),
    multi_factor_auth_enabled: optionalBoolean,
  },
  { additionalProperties: false },
);

const open = { additionalProperties: true } as const;
const patch = { additionalProperties: true, minProperties: 1 } as const;
const wrap = <K extends string, T extends TSchema>(key: K, schema: T) =>
  Type.Object({ [key]: schema } as { [P in K]: T }, { additionalProperties: true });

export const DomainCreate = wrap(
  'domain',
  Type.Object(
    {
      name: ProjectName,
      description: Type.Optional(Description),
      enabled: Type.Optional(Type.Boolean()),
      tags: Type.Optional(Tags),
      options: Type.Optional(ResourceOptions),
      explicit_domain_id: Type.Optional(Type.String()),
    },
    open,
  ),
);
export const DomainUpdate = wrap(
  'domain',
  Type.Object(
    {
      name: Type.Optional(ProjectName),
      description: Type.Optional(Description),
      enabled: Type.Optional(Type.Boolean()),
      tags: Type.Optional(Tags),
      options: Type.Optional(ResourceOptions),
    },
    patch,
  ),
);

export const ProjectCreate = wrap(
  'project',
  Type.Object(
    {
      name: ProjectName,
      domain_id: Type.Optional(nullable(Id)),
      parent_id: Type.Optional(nullable(Id)),
      is_domain: Type.Optional(Type.Boolean()),
      description: Type.Optional(Description),
      enabled: Type.Optional(Type.Boolean()),
      tags: Type.Optional(Tags),
      options: Type.Optional(ResourceOptions),
      explicit_domain_id: Type.Optional(Type.String()),
    },
    open,
  ),
);
export const ProjectUpdate = wrap(
  'project',
  Type.Object(
    {
      id: Type.Optional(Type.String()),
      name: Type.Optional(ProjectName),
      domain_id: Type.Optional(nullable(Id)),
      parent_id: Type.Optional(nullable(Id)),
      is_domain: Type.Optional(Type.Boolean()),
      description: Type.Optional(Description),
      enabled: Type.Optional(Type.Boolean()),
      tags: Type.Optional(Tags),
      options: Type.Optional(ResourceOptions),
    },
    patch,
  ),
);
export const TagsBody = Type.Object({ tags: Tags }, { additionalProperties: false });

/**
 * A user's federated objects (Keystone 22's user schema: `federated`, its items open): the unique
 * id the user has at each protocol of an identity provider.
 */
export const FederatedObjects = Type.Array(
  Type.Object(
    {
      idp_id: Type.String(),
      protocols: Type.Array(Type.Object({ protocol_id: Type.String(), unique_id: Type.String() }, open), { minItems: 1 }),
    },
    open,
  ),
  { description: "The user's federated identities: per identity provider, the protocols and the unique id at each." },
);

export const UserCreate = wrap(
  'user',
  Type.Object(
    {
      name: Name,
      domain_id: Type.Optional(Id),
      password: Type.Optional(nullable(Type.String({ maxLength: 4096 }))),
      enabled: Type.Optional(Type.Boolean()),
      default_project_id: Type.Optional(nullable(Id)),
      description: Type.Optional(Description),
      options: Type.Optional(UserOptions),
      federated: Type.Optional(FederatedObjects),
    },
    open,
  ),
);
export const UserUpdate = wrap(
  'user',
  Type.Object(
    {
      id: Type.Optional(Type.String()),
      name: Type.Optional(Name),
      domain_id: Type.Optional(Id),
      password: Type.Optional(nullable(Type.String({ maxLength: 4096 }))),
      enabled: Type.Optional(Type.Boolean()),
      default_project_id: Type.Optional(nullable(Id)),
      description: Type.Optional(Description),
      options: Type.Optional(UserOptions),
      federated: Type.Optional(FederatedObjects),
    },
    patch,
  ),
);
export const PasswordChange = Type.Object(
  {
    user: Type.Object(
      {
        original_password: Type.String({ maxLength: 4096 }),
        password: Type.String({ maxLength: 4096 }),
      },
      { additionalProperties: false },
    ),
  },
  { additionalProperties: true },
);

export const GroupCreate = wrap(
  'group',
  Type.Object({ name: Name, domain_id: Type.Optional(Id), description: Type.Optional(Description) }, open),
);
export const GroupUpdate = wrap(
  'group',
  Type.Object(
    { id: Type.Optional(Type.String()), name: Type.Optional(Name), domain_id: Type.Optional(Id), description: Type.Optional(Description) },
    patch,
  ),
);

export const RoleCreate = wrap(
  'role',
  Type.Object(
    { name: Name, domain_id: Type.Optional(nullable(Id)), description: Type.Optional(Description), options: Type.Optional(ResourceOptions) },
    open,
  ),
);
export const RoleUpdate = wrap(
  'role',
  Type.Object(
    {
      id: Type.Optional(Type.String()),
      name: Type.Optional(Name),
      domain_id: Type.Optional(nullable(Id)),
      description: Type.Optional(Description),
      options: Type.Optional(ResourceOptions),
    },
    patch,
  ),
);

export const RegionCreate = Type.Object(
  {
    region: Type.Optional(
      Type.Object(
        {
          id: Type.Optional(Type.String({ minLength: 1, maxLength: 255 })),
          description: Type.Optional(Description),
          parent_region_id: Type.Optional(nullable(Type.String({ maxLength: 255 }))),
        },
        open,
      ),
    ),
  },
  open,
);
export const RegionUpdate = wrap(
  'region',
  Type.Object(
    {
      id: Type.Optional(Type.String()),
      description: Type.Optional(Description),
      parent_region_id: Type.Optional(nullable(Type.String({ maxLength: 255 }))),
    },
    patch,
  ),
);

export const ServiceCreate = wrap(
  'service',
  Type.Object(
    {
      type: Type.String({ minLength: 1, maxLength: 255 }),
      name: Type.Optional(Type.String({ maxLength: 255 })),
      description: Type.Optional(Description),
      enabled: Type.Optional(Type.Boolean()),
    },
    open,
  ),
);
export const ServiceUpdate = wrap(
  'service',
  Type.Object(
    {
      id: Type.Optional(Type.String()),
      type: Type.Optional(Type.String({ minLength: 1, maxLength: 255 })),
      name: Type.Optional(Type.String({ maxLength: 255 })),
      description: Type.Optional(Description),
      enabled: Type.Optional(Type.Boolean()),
    },
    patch,
  ),
);

const Interface = Type.Union([Type.Literal('admin'), Type.Literal('internal'), Type.Literal('public')]);
export const EndpointCreate = wrap(
  'endpoint',
  Type.Object(
    {
      interface: Interface,
      service_id: Type.String({ minLength: 1, maxLength: 64 }),
      url: Url,
      // Keystone refuses null for both (only a string names a region).
      region_id: Type.Optional(Type.String({ maxLength: 255 })),
      region: Type.Optional(Type.String({ maxLength: 255 })),
      enabled: Type.Optional(Type.Boolean()),
    },
    open,
  ),
);
export const EndpointUpdate = wrap(
  'endpoint',
  Type.Object(
    {
      id: Type.Optional(Type.String()),
      interface: Type.Optional(Interface),
      service_id: Type.Optional(Type.String({ minLength: 1, maxLength: 64 })),
      url: Type.Optional(Url),
      // Keystone refuses null for both (only a string names a region).
      region_id: Type.Optional(Type.String({ maxLength: 255 })),
      region: Type.Optional(Type.String({ maxLength: 255 })),
      enabled: Type.Optional(Type.Boolean()),
    },
    patch,
  ),
);

/**
 * POST /v3/auth/tokens as sent: the leaves are typed here (scope as Keystone's schema types it); the
 * forms (methods and their objects, scope as one of unscoped, system, domain or project by id or by
 * name) are checked after the rate
 * limits by parseTokenRequest (src/token/token-request.ts), which gives Keystone's messages in
 * Keystone's order and the typed TokenRequest the token service takes.
 */
const NameOrId = Type.Object({ id: Type.Optional(Type.String()), name: Type.Optional(Type.String()) }, open);
/** An auth method naming a user (by id, or by name and domain) with its secret: password, totp. */
const userMethod = <T extends Record<string, TSchema>>(secret: T) =>
  Type.Optional(
    Type.Object(
      { user: Type.Optional(Type.Object({ id: Type.Optional(Type.String()), name: Type.Optional(Type.String()), ...secret, domain: Type.Optional(NameOrId) }, open)) },
      open,
    ),
  );

/**
 * Keystone's auth schema for `scope`: a string ("unscoped") or an object whose forms have typed
 * leaves; which form, and that it names one thing, parseTokenRequest checks (Keystone's order).
 */
const TokenScope = Type.Unsafe<string | Record<string, unknown>>({
  type: ['object', 'string'],
  description: 'What the token is for: "unscoped", or one of project (by id, or by name with its domain), domain, system or OS-TRUST:trust.',
  properties: {
    project: Type.Object({ id: Type.Optional(Type.String()), name: Type.Optional(Type.String()), domain: Type.Optional(NameOrId) }, open),
    domain: NameOrId,
    'OS-TRUST:trust': Type.Object({ id: Type.Optional(Type.String()) }, open),
    system: Type.Object({ all: Type.Optional(Type.Boolean()) }, open),
  },
  additionalProperties: true,
});

export const AuthBody = Type.Object(
  {
    auth: Type.Optional(Type.Object(
      {
        identity: Type.Object(
          {
            methods: Type.Array(Type.String()),
            password: userMethod({ password: Type.Optional(Type.String({ maxLength: 4096 })) }),
            token: Type.Optional(Type.Object({ id: Type.String() }, open)),
            oauth1: Type.Optional(Type.Object({}, open)),
            totp: userMethod({ passcode: Type.Optional(Type.Unknown({ description: 'The TOTP passcode (6 digits, as a string).' })) }),
            application_credential: Type.Optional(
              Type.Object(
                {
                  id: Type.Optional(Type.String()),
                  name: Type.Optional(Type.String()),
                  secret: Type.Optional(Type.String({ maxLength: 4096 })),
                  user: Type.Optional(
                    Type.Object({ id: Type.Optional(Type.String()), name: Type.Optional(Type.String()), domain: Type.Optional(NameOrId) }, open),
                  ),
                },
                open,
              ),
            ),
          },
          open,
        ),
        scope: Type.Optional(TokenScope),
      },
      open,
    )),
  },
  open,
);

// OS-OAUTH1 (Keystone's oauth1/schema.py): a consumer's description is a string or null, anything
// else is kept as extra; its secret is never set by the client; an authorization names roles.
export const ConsumerCreate = Type.Object(
  { consumer: Type.Optional(Type.Object({ description: Type.Optional(nullable(Type.String())) }, open)) },
  open,
);
export const ConsumerUpdate = Type.Object(
  { consumer: Type.Object({ description: Type.Optional(nullable(Type.String())) }, { additionalProperties: true, minProperties: 1, not: Type.Object({ secret: Type.Unknown() }, { required: ['secret'] }) }) },
  open,
);
export const RequestTokenAuthorize = Type.Object(
  {
    // Keystone authorizes an empty list (or none): the access token then delegates no role.
    roles: Type.Optional(
      Type.Array(
        Type.Object(
          { id: Type.Optional(Type.String({ minLength: 1, maxLength: 64, pattern: '^[a-zA-Z0-9-]+$' })), name: Type.Optional(Type.String({ minLength: 1, maxLength: 255 })) },
          { additionalProperties: false, minProperties: 1, maxProperties: 1 },
        ),
      ),
    ),
  },
  open,
);
export const ConsumerEntity = Type.Object({ id: Type.String(), description: Type.Optional(nullable(Type.String())), links: Type.Object({ self: Type.String() }) }, open);
export const CreatedConsumerEntity = Type.Object(
  { id: Type.String(), description: Type.Optional(nullable(Type.String())), secret: Type.String(), links: Type.Object({ self: Type.String() }) },
  open,
);
export const OAuth1AccessTokenEntity = Type.Object({
  id: Type.String(),
  authorizing_user_id: Type.String(),
  project_id: Type.String(),
  consumer_id: Type.String(),
  expires_at: nullable(Type.String()),
  links: Type.Object({ roles: Type.String(), self: Type.String() }),
});
export const OAuth1Verifier = Type.Object({ token: Type.Object({ oauth_verifier: Type.String() }) });
// The signed endpoints answer a form-encoded body (oauth_token=…&oauth_token_secret=…[&oauth_expires_at=…]).
export const OAuth1Credentials = Type.String({ description: 'application/x-www-form-urlencoded: oauth_token, oauth_token_secret and (unless the duration is 0) oauth_expires_at.' });

// Keystone's policy schema: blob and type strings (type at most 255), anything else kept as extra.
const PolicyType = Type.String({ maxLength: 255 });
export const PolicyCreate = Type.Object(
  { policy: Type.Optional(Type.Object({ blob: Type.String(), type: PolicyType }, open)) },
  open,
);
export const PolicyUpdate = Type.Object(
  { policy: Type.Optional(Type.Object({ id: Type.Optional(Type.Unknown()), blob: Type.Optional(Type.String()), type: Type.Optional(PolicyType) }, patch)) },
  open,
);

// Keystone's credential_create: leaf types here; its oneOf (ec2 needs project_id) is checked by the route.
export const CredentialCreate = Type.Object(
  {
    credential: Type.Optional(
      Type.Object(
        {
          blob: Type.Optional(Type.String()),
          type: Type.Optional(Type.String({ maxLength: 255 })),
          user_id: Type.Optional(Type.String({ maxLength: 64 })),
          project_id: Type.Optional(Type.String({ maxLength: 64 })),
        },
        open,
      ),
    ),
  },
  open,
);
// Keystone 22's credential_update: only the blob, and it is required.
// (Other properties are refused by the route, in Keystone's order: before a missing blob.)
export const CredentialUpdate = Type.Object({ credential: Type.Optional(Type.Object({ blob: Type.Optional(Type.String()) }, open)) }, open);
// OS-EC2 create: Keystone reads tenant_id and nothing else (a missing one is "project None").
export const Ec2CredentialCreate = Type.Object({ tenant_id: Type.Optional(Type.Unknown()) }, open);
// /v3/ec2tokens and /v3/s3tokens: Keystone takes `credentials`, `credential` or `ec2Credentials` as sent.
export const SignedRequestBody = Type.Object(
  {
    credentials: Type.Optional(Type.Unknown({ description: 'access, signature and the signed request: host, verb, path, params, headers, body_hash (EC2) or token (S3)' })),
    credential: Type.Optional(Type.Unknown()),
    ec2Credentials: Type.Optional(Type.Unknown()),
  },
  open,
);

// OS-EP-FILTER: attributes beyond these are refused by the service (Keystone's words), not here.
export const EndpointGroupCreate = wrap(
  'endpoint_group',
  Type.Object({ name: Name, description: Type.Optional(Description), filters: Type.Object({}, open) }, open),
);
export const EndpointGroupUpdate = wrap(
  'endpoint_group',
  Type.Object({ name: Type.Optional(Name), description: Type.Optional(Description), filters: Type.Optional(Type.Object({}, open)) }, patch),
);

// ---- unified limits (Keystone's limit/schema.py: closed objects, lists of at least one) ----------

const LimitValue = Type.Integer({ minimum: -1, maximum: 2147483647 });
const ResourceName = Type.String({ minLength: 1, maxLength: 255 });
const registeredLimitProperties = {
  service_id: Id,
  region_id: Type.Optional(nullable(Type.String())),
  resource_name: ResourceName,
  default_limit: LimitValue,
  description: Type.Optional(Description),
};
const closed = { additionalProperties: false } as const;
export const RegisteredLimitsCreate = Type.Object(
  { registered_limits: Type.Array(Type.Object(registeredLimitProperties, closed), { minItems: 1 }) },
  open,
);
export const RegisteredLimitUpdate = Type.Object(
  {
    registered_limit: Type.Optional(
      Type.Object(
        {
          service_id: Type.Optional(Id),
          region_id: Type.Optional(nullable(Type.String())),
          resource_name: Type.Optional(ResourceName),
          default_limit: Type.Optional(LimitValue),
          description: Type.Optional(Description),
        },
        closed,
      ),
    ),
  },
  open,
);
const limitProperties = {
  service_id: Id,
  region_id: Type.Optional(Type.String()),
  resource_name: ResourceName,
  resource_limit: LimitValue,
  description: Type.Optional(Description),
};
export const LimitsCreate = Type.Object(
  {
    limits: Type.Array(
      Type.Union([Type.Object({ project_id: Id, ...limitProperties }, closed), Type.Object({ domain_id: Id, ...limitProperties }, closed)]),
      { minItems: 1 },
    ),
  },
  open,
);
export const LimitUpdate = Type.Object(
  { limit: Type.Optional(Type.Object({ resource_limit: Type.Optional(LimitValue), description: Type.Optional(Description) }, closed)) },
  open,
);

// ---- response shapes ---------------------------------------------------------------------------

const Links = Type.Object({ self: Type.String() }, open);
const CollectionLinks = Type.Object({ self: Type.String(), previous: Type.Null(), next: Type.Null() });
const AnyObject = Type.Object({}, open);

const entity = (properties: Record<string, TSchema>) => Type.Object({ ...properties, links: Links }, open);

export const DomainEntity = entity({
  id: Type.String(),
  name: Type.String(),
  description: Type.String(),
  enabled: Type.Boolean(),
  tags: Type.Array(Type.String()),
  options: AnyObject,
});
export const ProjectEntity = entity({
  id: Type.String(),
  name: Type.String(),
  domain_id: nullable(Type.String()),
  description: Type.String(),
  enabled: Type.Boolean(),
  parent_id: nullable(Type.String()),
  is_domain: Type.Boolean(),
  tags: Type.Array(Type.String()),
  options: AnyObject,
});
export const UserEntity = entity({
  id: Type.String(),
  name: Type.String(),
  domain_id: Type.String(),
  enabled: Type.Boolean(),
  password_expires_at: nullable(Type.String()),
  options: AnyObject,
  /** A user's federated identities (GET /v3/users/{id}, and a create or update that set them); never in lists, as Keystone. */
  federated: Type.Optional(FederatedObjects),
});
export const GroupEntity = entity({ id: Type.String(), name: Type.String(), domain_id: Type.String(), description: Type.String() });
export const RoleEntity = entity({
  id: Type.String(),
  name: Type.String(),
  domain_id: nullable(Type.String()),
  description: nullable(Type.String()),
  options: AnyObject,
});
export const RegionEntity = entity({ id: Type.String(), description: Type.String(), parent_region_id: nullable(Type.String()) });
export const ServiceEntity = entity({ id: Type.String(), type: Type.String(), name: Type.String(), enabled: Type.Boolean() });
export const EndpointEntity = entity({
  id: Type.String(),
  interface: Type.String(),
  region_id: nullable(Type.String()),
  region: nullable(Type.String()),
  service_id: Type.String(),
  url: Type.String(),
  enabled: Type.Boolean(),
});
/** An endpoint as OS-ENDPOINT-POLICY lists it (no legacy `region`). */
export const PolicyEndpointEntity = entity({
  id: Type.String(),
  interface: Type.String(),
  region_id: nullable(Type.String()),
  service_id: Type.String(),
  url: Type.String(),
  enabled: Type.Boolean(),
});
export const PolicyEntity = entity({ id: Type.String(), type: Type.String(), blob: Type.String() });
export const CredentialEntity = entity({ id: Type.String(), user_id: Type.String(), project_id: nullable(Type.String()), type: Type.String(), blob: Type.String() });
export const Ec2CredentialEntity = Type.Object({
  user_id: Type.String(),
  tenant_id: nullable(Type.String()),
  access: Type.Unknown(),
  secret: Type.Unknown(),
  trust_id: Type.Unknown(),
  links: Links,
});

export const EndpointGroupEntity = entity({ id: Type.String(), name: Type.String(), description: nullable(Type.String()), filters: AnyObject });
export const ProjectEndpointGroupBody = Type.Object({
  project_endpoint_group: Type.Object({ endpoint_group_id: Type.String(), project_id: Type.String(), links: Links }),
});

export const RegisteredLimitEntity = entity({
  id: Type.String(),
  service_id: Type.String(),
  region_id: nullable(Type.String()),
  resource_name: Type.String(),
  default_limit: Type.Integer(),
  description: nullable(Type.String()),
});
export const LimitEntity = entity({
  id: Type.String(),
  project_id: nullable(Type.String()),
  domain_id: nullable(Type.String()),
  resource_limit: Type.Integer(),
  description: nullable(Type.String()),
  service_id: Type.String(),
  region_id: nullable(Type.String()),
  resource_name: Type.String(),
});
export const LimitModelBody = Type.Object({ model: Type.Object({ name: Type.String(), description: Type.String() }) });
/** A created list: `{"<key>": [entities]}`, no collection links (Keystone drops them). */
export const created = <K extends string, T extends TSchema>(key: K, schema: T) =>
  Type.Object({ [key]: Type.Array(schema) } as { [P in K]: ReturnType<typeof Type.Array<T>> });

/** `{"<key>": entity}` */
export const one = <K extends string, T extends TSchema>(key: K, schema: T) => Type.Object({ [key]: schema } as { [P in K]: T });
/** `{"<key>": [entities], "links": {...}}` */
export const many = <K extends string, T extends TSchema>(key: K, schema: T) =>
  Type.Object({
    ...({ [key]: Type.Array(schema) } as { [P in K]: ReturnType<typeof Type.Array<T>> }),
    links: CollectionLinks,
    truncated: Type.Optional(Type.Boolean()),
  });

const RoleReference = Type.Object({ id: Type.String(), name: Type.String(), links: Links });
export const RoleInference = Type.Object({
  role_inference: Type.Object({ prior_role: RoleReference, implies: RoleReference }),
  links: Links,
});
export const RoleInferenceList = Type.Object({
  role_inference: Type.Object({ prior_role: RoleReference, implies: Type.Array(RoleReference) }),
  links: Links,
});
export const RoleInferences = Type.Object({
  role_inferences: Type.Array(Type.Object({ prior_role: RoleReference, implies: Type.Array(RoleReference) })),
});

export const RoleAssignments = Type.Object({
  role_assignments: Type.Array(Type.Object({ role: AnyObject, scope: AnyObject, links: AnyObject }, open)),
  links: CollectionLinks,
});

const CatalogEndpoint = Type.Object({
  id: Type.String(),
  interface: Type.String(),
  region_id: nullable(Type.String()),
  region: nullable(Type.String()),
  url: Type.String(),
});
export const Catalog = Type.Array(
  Type.Object({ id: Type.String(), type: Type.String(), name: Type.String(), endpoints: Type.Array(CatalogEndpoint) }),
);
export const CatalogBody = Type.Object({ catalog: Catalog, links: Type.Object({ self: Type.String() }) });

const NamedDomain = Type.Object({ id: Type.String(), name: Type.String() });
export const TokenBody = Type.Object({
  token: Type.Object({
    methods: Type.Array(Type.String()),
    user: Type.Object({
      domain: NamedDomain,
      id: Type.String(),
      name: Type.String(),
      // A federated token's user has none (Keystone removes it).
      password_expires_at: Type.Optional(nullable(Type.String())),
      'OS-FEDERATION': Type.Optional(
        Type.Object({
          groups: Type.Array(Type.Object({ id: Type.String() })),
          identity_provider: Type.Object({ id: Type.String() }),
          protocol: Type.Object({ id: Type.String() }),
        }),
      ),
    }),
    audit_ids: Type.Array(Type.String()),
    expires_at: Type.String(),
    issued_at: Type.String(),
    project: Type.Optional(Type.Object({ domain: NamedDomain, id: Type.String(), name: Type.String() })),
    is_domain: Type.Optional(Type.Boolean()),
    domain: Type.Optional(NamedDomain),
    system: Type.Optional(Type.Object({ all: Type.Boolean() })),
    roles: Type.Optional(
      Type.Array(
        Type.Object({
          id: Type.String(),
          name: Type.String(),
          // A trust-scoped token lists its roles in full, as Keystone does.
          domain_id: Type.Optional(nullable(Type.String())),
          description: Type.Optional(nullable(Type.String())),
          options: Type.Optional(AnyObject),
        }),
      ),
    ),
    catalog: Type.Optional(Catalog),
    service_providers: Type.Optional(Type.Array(Type.Object({ auth_url: Type.String(), id: Type.String(), sp_url: Type.String() }), { description: 'The enabled K2K service providers (OS-FEDERATION), in every token body when there are any.' })),
    'OS-TRUST:trust': Type.Optional(
      Type.Object({
        id: Type.String(),
        trustor_user: Type.Object({ id: Type.String() }),
        trustee_user: Type.Object({ id: Type.String() }),
        impersonation: Type.Boolean(),
      }),
    ),
    application_credential: Type.Optional(
      Type.Object({
        id: Type.String(),
        name: Type.String(),
        restricted: Type.Boolean(),
        access_rules: Type.Optional(Type.Array(Type.Object({ id: Type.String(), service: Type.String(), path: Type.String(), method: Type.String() }))),
      }),
    ),
    'OS-OAUTH1': Type.Optional(Type.Object({ access_token_id: Type.String(), consumer_id: Type.String() })),
  }),
});

export const Version = Type.Object({
  id: Type.String(),
  status: Type.String(),
  updated: Type.String(),
  links: Type.Array(Type.Object({ rel: Type.String(), href: Type.String() })),
  'media-types': Type.Array(Type.Object({ base: Type.String(), type: Type.String() })),
});

/** One OS-REVOKE event: what it matches (only the attributes it has), and its times. */
export const RevokeEvent = Type.Object({
  user_id: Type.Optional(Type.String()),
  project_id: Type.Optional(Type.String()),
  domain_id: Type.Optional(Type.String()),
  role_id: Type.Optional(Type.String()),
  audit_id: Type.Optional(Type.String()),
  audit_chain_id: Type.Optional(Type.String()),
  'OS-TRUST:trust_id': Type.Optional(Type.String()),
  'OS-OAUTH1:consumer_id': Type.Optional(Type.String()),
  'OS-OAUTH1:access_token_id': Type.Optional(Type.String()),
  expires_at: Type.Optional(Type.String()),
  issued_before: Type.String(),
  revoked_at: Type.String(),
});
export const RevokeEvents = Type.Object({
  events: Type.Array(RevokeEvent),
  links: CollectionLinks,
});

export const ErrorBody = Type.Object({
  error: Type.Object({ code: Type.Integer(), title: Type.String(), message: Type.String() }, open),
});

export type TokenBodyShape = Static<typeof TokenBody>['token'];

/** Path parameters, all strings. */
export const params = <K extends string>(...names: K[]) =>
  Type.Object(Object.fromEntries(names.map((name) => [name, Type.String()])) as { [P in K]: ReturnType<typeof Type.String> });

const Method = Type.Union(['POST', 'GET', 'HEAD', 'PATCH', 'PUT', 'DELETE'].map((method) => Type.Literal(method)));
export const ApplicationCredentialCreate = Type.Object(
  {
    application_credential: Type.Object(
      {
        name: Name,
        description: Type.Optional(Description),
        secret: Type.Optional(Type.String({ minLength: 1, maxLength: 4096 })),
        expires_at: Type.Optional(nullable(Type.String({ maxLength: 64 }))),
        roles: Type.Optional(
          Type.Array(Type.Object({ id: Type.Optional(Type.String()), name: Type.Optional(Type.String()) }, { additionalProperties: false, minProperties: 1 })),
        ),
        unrestricted: Type.Optional(Type.Boolean()),
        access_rules: Type.Optional(
          Type.Array(
            Type.Object(
              {
                id: Type.Optional(Type.String()),
                service: Type.Optional(Type.String({ minLength: 1, maxLength: 64 })),
                path: Type.Optional(Type.String({ minLength: 1, maxLength: 225, pattern: '^/' })),
                method: Type.Optional(Method),
              },
              { additionalProperties: false },
            ),
          ),
        ),
      },
      { additionalProperties: false },
    ),
  },
  open,
);

const AccessRuleShape = Type.Object({ id: Type.String(), service: Type.String(), path: Type.String(), method: Type.String() });
export const AccessRuleEntity = Type.Object({ id: Type.String(), service: Type.String(), path: Type.String(), method: Type.String(), links: Links });
export const ApplicationCredentialEntity = Type.Object({
  id: Type.String(),
  name: Type.String(),
  description: nullable(Type.String()),
  user_id: Type.String(),
  project_id: nullable(Type.String()),
  system: Type.Null(),
  expires_at: nullable(Type.String()),
  unrestricted: nullable(Type.Boolean()),
  roles: Type.Array(RoleEntity),
  access_rules: Type.Optional(Type.Array(AccessRuleShape)),
  secret: Type.Optional(Type.String()),
  links: Links,
});

// POST /v3/gateway/policy/explain: a token, or roles + scope, and the request to decide.
export const GatewayExplainBody = Type.Object(
  {
    explain: Type.Object(
      {
        method: Type.String({ minLength: 1, maxLength: 16 }),
        path: Type.String({ minLength: 1, maxLength: 8192 }),
        token: Type.Optional(Type.String({ minLength: 1, maxLength: 8192 })),
        roles: Type.Optional(Type.Array(Type.String({ minLength: 1, maxLength: 255 }), { maxItems: 1000 })),
        scope: Type.Optional(Type.Union([Type.Literal('project'), Type.Literal('domain'), Type.Literal('system')])),
        project_id: Type.Optional(Type.String({ minLength: 1, maxLength: 64 })),
        user_id: Type.Optional(Type.String({ minLength: 1, maxLength: 64 })),
      },
      { additionalProperties: false },
    ),
  },
  { additionalProperties: false },
);

const PolicyMatchEntity = Type.Object({
  rule: Type.String(),
  source: Type.String(),
  line: Type.Integer(),
  effect: Type.Union([Type.Literal('allow'), Type.Literal('deny')]),
});
export const GatewayExplanationBody = Type.Object({
  explanation: Type.Object({
    allowed: Type.Boolean(),
    reason: Type.String(),
    rule: Type.Optional(Type.String()),
    source: Type.Optional(Type.String()),
    line: Type.Optional(Type.Integer()),
    service: Type.String(),
    method: Type.String(),
    path: Type.String(),
    subject: Type.Object({
      roles: Type.Array(Type.String()),
      scope: Type.String(),
      project_id: Type.Optional(Type.String()),
      user_id: Type.String(),
    }),
    matches: Type.Array(PolicyMatchEntity),
  }),
});

// ---- OS-TRUST ----------------------------------------------------------------------------------

/** POST /v3/OS-TRUST/trusts, as Keystone's trust_create schema (other keys are allowed). */
export const TrustCreate = Type.Object({
  trust: Type.Object(
    {
      trustor_user_id: Type.String({ minLength: 1, maxLength: 64 }),
      trustee_user_id: Type.String({ minLength: 1, maxLength: 64 }),
      impersonation: Type.Boolean(),
      project_id: Type.Optional(nullable(Id)),
      roles: Type.Optional(
        Type.Array(
          Type.Object(
            { id: Type.Optional(Id), name: Type.Optional(Type.String({ minLength: 1, maxLength: 255, pattern: '[\\S]+' })) },
            { additionalProperties: false, minProperties: 1, maxProperties: 1 },
          ),
        ),
      ),
      expires_at: Type.Optional(nullable(Type.String())),
      remaining_uses: Type.Optional(nullable(Type.Integer({ minimum: 1 }))),
      allow_redelegation: Type.Optional(nullable(Type.Boolean())),
      redelegation_count: Type.Optional(nullable(Type.Integer({ minimum: 0 }))),
    },
    open,
  ),
});

const TrustFields = {
  id: Type.String(),
  trustor_user_id: Type.String(),
  trustee_user_id: Type.String(),
  project_id: nullable(Type.String()),
  impersonation: Type.Boolean(),
  expires_at: nullable(Type.String()),
  remaining_uses: nullable(Type.Integer()),
  deleted_at: Type.Null(),
  redelegated_trust_id: nullable(Type.String()),
  redelegation_count: Type.Integer(),
};
/** A trust in a list (no roles). */
export const TrustSummary = entity(TrustFields);
/** A trust shown or created: with its roles and Keystone's roles_links. */
export const TrustEntity = entity({ ...TrustFields, roles: Type.Array(RoleEntity), roles_links: CollectionLinks });

// ---- OS-FEDERATION -----------------------------------------------------------------------------
// Keystone's federation/schema.py. The wrapper may be missing (Keystone reads it as {}); the routes
// answer that as Keystone does. Mappings are checked by federation/mapping-rules-schema.ts.

const FederationLinks = Type.Object({ self: Type.String() });
const identityProviderProperties = {
  enabled: Type.Optional(Type.Boolean()),
  description: Type.Optional(Description),
  authorization_ttl: Type.Optional(nullable(Type.Integer({ minimum: 0 }))),
  remote_ids: Type.Optional(nullable(Type.Array(Type.String(), { uniqueItems: true }))),
};
export const IdentityProviderCreate = Type.Object(
  {
    identity_provider: Type.Optional(
      Type.Object({ ...identityProviderProperties, domain_id: Type.Optional(nullable(Id)) }, { additionalProperties: false }),
    ),
  },
  open,
);
export const IdentityProviderUpdate = Type.Object(
  { identity_provider: Type.Optional(Type.Object(identityProviderProperties, { additionalProperties: false, minProperties: 1 })) },
  open,
);
export const IdentityProviderEntity = Type.Object({
  id: Type.String(),
  domain_id: Type.String(),
  enabled: Type.Boolean(),
  description: nullable(Type.String()),
  remote_ids: Type.Array(Type.String()),
  authorization_ttl: nullable(Type.Integer()),
  links: Type.Object({ self: Type.String(), protocols: Type.String() }),
});

export const MappingBody = Type.Object(
  { mapping: Type.Optional(Type.Unknown({ description: '{"rules": [{"local": [...], "remote": [...]}]}, checked against Keystone\'s mapping schema.' })) },
  open,
);
export const MappingEntity = Type.Object({ id: Type.String(), rules: Type.Array(Type.Unknown()), links: FederationLinks });

const MappingId = Type.String({ minLength: 1, maxLength: 64, pattern: '^[a-zA-Z0-9-_]+$' });
const RemoteIdAttribute = Type.String({ maxLength: 64 });
export const ProtocolCreate = Type.Object(
  { protocol: Type.Optional(Type.Object({ mapping_id: MappingId, remote_id_attribute: Type.Optional(RemoteIdAttribute) }, { additionalProperties: false })) },
  open,
);
export const ProtocolUpdate = Type.Object(
  {
    protocol: Type.Optional(
      Type.Object({ mapping_id: Type.Optional(MappingId), remote_id_attribute: Type.Optional(RemoteIdAttribute) }, { additionalProperties: false, minProperties: 1 }),
    ),
  },
  open,
);
/** A protocol shown: Keystone leaves out idp_id and remote_id_attribute except in lists. */
export const ProtocolEntity = Type.Object({
  id: Type.String(),
  idp_id: Type.Optional(Type.String()),
  mapping_id: Type.String(),
  remote_id_attribute: Type.Optional(nullable(Type.String())),
  links: Type.Object({ self: Type.String(), identity_provider: Type.String() }),
});

// Keystone's parameter_types.url: any scheme, at most 225 characters (its own NOTE: the column holds 256).
const FederationUrl = Type.String({ maxLength: 225, pattern: '^[a-zA-Z0-9+.\\-]+:.+' });
const serviceProviderProperties = {
  auth_url: FederationUrl,
  sp_url: FederationUrl,
  description: Type.Optional(Description),
  enabled: Type.Optional(Type.Boolean()),
  // Keystone's schema lets null through to a NOT NULL column (a 500): refused here.
  relay_state_prefix: Type.Optional(Type.String()),
};
export const ServiceProviderCreate = Type.Object(
  { service_provider: Type.Optional(Type.Object(serviceProviderProperties, { additionalProperties: false })) },
  open,
);
export const ServiceProviderUpdate = Type.Object(
  {
    service_provider: Type.Optional(
      Type.Object(
        {
          ...serviceProviderProperties,
          auth_url: Type.Optional(FederationUrl),
          sp_url: Type.Optional(FederationUrl),
        },
        { additionalProperties: false, minProperties: 1 },
      ),
    ),
  },
  open,
);
export const ServiceProviderEntity = Type.Object({
  auth_url: Type.String(),
  id: Type.String(),
  enabled: Type.Boolean(),
  description: nullable(Type.String()),
  relay_state_prefix: Type.String(),
  sp_url: Type.String(),
  links: FederationLinks,
});
