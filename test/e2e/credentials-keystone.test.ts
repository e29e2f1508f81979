import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import path from 'node:path';
import t from 'tap';
import { ADMIN_PASSWORD, PUBLIC_URL, startTestApp } from '../helpers/app.ts';
import { call, passwordAuth } from '../helpers/keystone-client.ts';
import { PEER_PASSWORD, PEER_URL, peerUp } from '../helpers/keystone-peer.ts';

// Credentials (/v3/credentials, OS-EC2) and /v3/ec2tokens, /v3/s3tokens over HTTP, against this
// service and against the real Keystone 22 (../shared/peers/keystone/start.sh; that half is skipped
// without a peer): the same requests, the same statuses, messages and keys. Requests to the token
// routes are signed by botocore. Everything the run makes is deleted at the end.

interface Seen {
  status: number;
  said: unknown;
}

const SIGNER = path.join(import.meta.dirname, '../helpers/aws-sign.py');
const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');

function sign(mode: 'ec2-v4' | 'ec2-v2' | 's3-v1', access: string, secret: string): Record<string, unknown> {
  const date = new Date().toISOString().replace(/[-:]/g, '').replace(/\.\d+Z$/, 'Z');
  const input = JSON.stringify({ mode, access, secret, date, params: { Action: 'DescribeInstances' }, path: mode === 's3-v1' ? '/bucket/key' : '/' });
  return JSON.parse(execFileSync('python3', [SIGNER], { input, encoding: 'utf8' })) as Record<string, unknown>;
}

async function scenario(base: string, adminPassword: string, linkBase = base): Promise<Record<string, Seen>> {
  const prefix = `cred-${Date.now().toString(36)}${Math.random().toString(36).slice(2, 6)}`;
  const login = await call(`${base}/v3/auth/tokens`, {
    method: 'POST',
    body: passwordAuth({ name: 'admin', domainId: 'default' }, adminPassword, { project: { name: 'admin', domain: { id: 'default' } } }),
  });
  if (login.status !== 201) throw new Error(`admin login: ${login.status}`);
  const me = login.body.token as { user: { id: string }; project: { id: string } };
  const api = (method: string, route: string, body?: unknown) => call(`${base}${route}`, { method, token: login.token, ...(body === undefined ? {} : { body }) });
  const labels = new Map<string, string>([
    [me.user.id, '<admin>'],
    [me.project.id, '<project>'],
  ]);
  const plain = (value: unknown): unknown => {
    let text = JSON.stringify(value ?? null).split(linkBase).join('<base>');
    for (const [id, name] of labels) text = text.split(id).join(name);
    return JSON.parse(text.split(prefix).join('~'));
  };
  const keys = (entity: Record<string, unknown>) => Object.keys(entity).sort();
  const seen: Record<string, Seen> = {};
  const created: string[] = [];
  const ask = async (step: string, method: string, route: string, body?: unknown, show?: (body: any) => unknown) => {
    const answer = await api(method, route, body);
    if (answer.status === 201 && answer.body?.credential?.id) created.push(answer.body.credential.id);
    if (answer.status === 201 && answer.body?.credential?.access) created.push(sha256(answer.body.credential.access));
    const error = answer.body?.error as { message: string } | undefined;
    let said: unknown = null;
    if (error) {
      const first = error.message.split('\n')[0]!;
      said = plain(first.startsWith('Invalid input for field') ? first.split(':')[0] : first);
    } else if (show && answer.body !== undefined) said = show(answer.body);
    seen[step] = { status: answer.status, said };
    return answer;
  };
  try {
    const access = `${prefix}-access`;
    const cert = await ask('create cert', 'POST', '/v3/credentials', { credential: { type: 'cert', blob: 'hello', user_id: me.user.id, level: 5 } }, (body) => [
      keys(body.credential),
      plain({ ...body.credential, id: undefined, links: undefined }),
    ]);
    const certId = cert.body.credential.id as string;
    labels.set(certId, '<cert>');
    const ec2Blob = JSON.stringify({ access, secret: 'sekrit' });
    const ec2 = await ask('create ec2', 'POST', '/v3/credentials', { credential: { type: 'ec2', blob: ec2Blob, user_id: me.user.id, project_id: me.project.id } }, (body) => [body.credential.id === sha256(access)]);
    const ec2Id = ec2.body.credential.id as string;
    labels.set(ec2Id, '<ec2>');
    await ask('create ec2 again', 'POST', '/v3/credentials', { credential: { type: 'ec2', blob: ec2Blob, user_id: me.user.id, project_id: me.project.id } });
    await ask('ec2 without project', 'POST', '/v3/credentials', { credential: { type: 'ec2', blob: ec2Blob, user_id: me.user.id } });
    await ask('ec2 blob not json', 'POST', '/v3/credentials', { credential: { type: 'ec2', blob: 'x', user_id: me.user.id, project_id: me.project.id } });
    await ask('ec2 blob empty', 'POST', '/v3/credentials', { credential: { type: 'ec2', blob: '{}', user_id: me.user.id, project_id: me.project.id } });
    await ask('ec2 blob without access', 'POST', '/v3/credentials', { credential: { type: 'ec2', blob: '{"secret": "s"}', user_id: me.user.id, project_id: me.project.id } });
    await ask('cert without user', 'POST', '/v3/credentials', { credential: { type: 'cert', blob: 'x' } });
    await ask('blob not a string', 'POST', '/v3/credentials', { credential: { type: 'cert', blob: 5, user_id: me.user.id } });
    await ask('get cert', 'GET', `/v3/credentials/${certId}`, undefined, (body) => plain(body.credential));
    await ask('list ec2 of admin', 'GET', `/v3/credentials?type=ec2&user_id=${me.user.id}`, undefined, (body) =>
      (plain(body.credentials.map((c: { id: string }) => c.id)) as string[]).filter((id) => id.startsWith('<')).sort(),
    );
    await ask('patch access', 'PATCH', `/v3/credentials/${ec2Id}`, { credential: { blob: JSON.stringify({ access: `${access}-2`, secret: 'sekrit' }) } }, (body) => plain(body.credential));
    await ask('patch type', 'PATCH', `/v3/credentials/${certId}`, { credential: { type: 'ec2' } });
    await ask('patch nothing', 'PATCH', `/v3/credentials/${certId}`, { credential: {} });
    await ask('patch bad ec2 blob', 'PATCH', `/v3/credentials/${ec2Id}`, { credential: { blob: 'nojson' } });
    await ask('get missing', 'GET', '/v3/credentials/no-such-credential');

    const os = `/v3/users/${me.user.id}/credentials/OS-EC2`;
    const made = await ask('os-ec2 create', 'POST', os, { tenant_id: me.project.id }, (body) => keys(body.credential));
    const osAccess = made.body.credential.access as string;
    const osSecret = made.body.credential.secret as string;
    labels.set(osAccess, '<access>');
    labels.set(osSecret, '<secret>');
    labels.set(sha256(osAccess), '<os-ec2>');
    await ask('os-ec2 get', 'GET', `${os}/${osAccess}`, undefined, (body) => plain(body.credential));
    await ask('os-ec2 as v3', 'GET', `/v3/credentials/${sha256(osAccess)}`, undefined, (body) => plain(body.credential));
    await ask('os-ec2 bad tenant', 'POST', os, { tenant_id: 'no-such-project' });
    await ask('os-ec2 no tenant', 'POST', os, {});
    await ask('os-ec2 unknown user', 'POST', '/v3/users/no-such-user/credentials/OS-EC2', { tenant_id: me.project.id });
    await ask('os-ec2 get missing', 'GET', `${os}/no-such-access`);

    const tokenShape = (body: any) => [body.token.methods, plain(body.token.user.id), plain(body.token.project.id), keys(body.token)];
    await ask('ec2tokens v4', 'POST', '/v3/ec2tokens', { credentials: sign('ec2-v4', osAccess, osSecret) }, tokenShape);
    await ask('ec2tokens v2', 'POST', '/v3/ec2tokens', { credentials: sign('ec2-v2', osAccess, osSecret) }, tokenShape);
    await ask('ec2tokens bad signature', 'POST', '/v3/ec2tokens', { credentials: { ...sign('ec2-v4', osAccess, osSecret), signature: '0'.repeat(64) } });
    await ask('ec2tokens unknown access', 'POST', '/v3/ec2tokens', { credentials: sign('ec2-v4', 'no-such-access', 'x') });
    await ask('ec2tokens empty body', 'POST', '/v3/ec2tokens', {});
    await ask('ec2tokens no access', 'POST', '/v3/ec2tokens', { credentials: {} });
    await ask('s3tokens v1', 'POST', '/v3/s3tokens', { credentials: sign('s3-v1', osAccess, osSecret) }, tokenShape);
    await ask('s3tokens bad signature', 'POST', '/v3/s3tokens', { credentials: { ...sign('s3-v1', osAccess, osSecret), signature: 'AAAA' } });

    // A trust-scoped token's EC2 credential carries the trust; ec2tokens gives the trust's roles only.
    const trustee = (await api('POST', '/v3/users', { user: { name: `${prefix}-trustee`, password: 'Trustee-1', domain_id: 'default' } })).body.user.id as string;
    labels.set(trustee, '<trustee>');
    try {
      const trust = (await api('POST', '/v3/OS-TRUST/trusts', { trust: { trustor_user_id: me.user.id, trustee_user_id: trustee, project_id: me.project.id, impersonation: false, roles: [{ name: 'reader' }] } })).body.trust.id as string;
      labels.set(trust, '<trust>');
      const trustLogin = await call(`${base}/v3/auth/tokens`, { method: 'POST', body: passwordAuth({ id: trustee }, 'Trustee-1', { 'OS-TRUST:trust': { id: trust } }) });
      const viaTrust = await call(`${base}/v3/users/${trustee}/credentials/OS-EC2`, { method: 'POST', token: trustLogin.token, body: { tenant_id: me.project.id } });
      seen['os-ec2 create with a trust-scoped token'] = { status: viaTrust.status, said: viaTrust.body?.error ? plain(viaTrust.body.error.message) : 'created' };
      // A credential that names the trust (as Keystone once stamped them), written by the admin.
      const trustAccess = `${prefix}-trusted`;
      const trustSecret = 'trusted-secret';
      await ask('create ec2 naming a trust', 'POST', '/v3/credentials', { credential: { type: 'ec2', user_id: trustee, project_id: me.project.id, blob: JSON.stringify({ access: trustAccess, secret: trustSecret, trust_id: trust }) } }, (body) => plain(JSON.parse(body.credential.blob)));
      await ask('ec2tokens of a trust credential', 'POST', '/v3/ec2tokens', { credentials: sign('ec2-v4', trustAccess, trustSecret) }, (body) => [
        body.token.methods,
        plain(body.token.user.id),
        plain(body.token.project.id),
        plain(body.token['OS-TRUST:trust']),
        body.token.roles.map((role: { name: string }) => role.name).sort(),
      ]);
      await api('DELETE', `/v3/OS-TRUST/trusts/${trust}`);
      await ask('ec2tokens after the trust is deleted', 'POST', '/v3/ec2tokens', { credentials: sign('ec2-v4', trustAccess, trustSecret) });
    } finally {
      await api('DELETE', `/v3/users/${trustee}`);
    }

    await ask('os-ec2 delete', 'DELETE', `${os}/${osAccess}`);
    await ask('os-ec2 delete again', 'DELETE', `${os}/${osAccess}`);
    await ask('delete cert', 'DELETE', `/v3/credentials/${certId}`);
    await ask('get deleted', 'GET', `/v3/credentials/${certId}`);
  } finally {
    for (const id of created) await api('DELETE', `/v3/credentials/${id}`);
  }
  return seen;
}

// What Keystone 22 answered (ids and names as labels; '~' is the run's prefix).
const KEYSTONE: Record<string, Seen> = {
  "create cert": {
    "status": 201,
    "said": [
      [
        "blob",
        "id",
        "level",
        "links",
        "project_id",
        "type",
        "user_id"
      ],
      {
        "level": 5,
        "user_id": "<admin>",
        "project_id": null,
        "type": "cert",
        "blob": "hello"
      }
    ]
  },
  "create ec2": {
    "status": 201,
    "said": [
      true
    ]
  },
  "create ec2 again": {
    "status": 409,
    "said": "Conflict occurred attempting to store credential - Duplicate entry found with ID <ec2>."
  },
  "ec2 without project": {
    "status": 400,
    "said": "{'type': 'ec2', 'blob': '{\"access\":\"~-access\",\"secret\":\"sekrit\"}', 'user_id': '<admin>'} is not valid under any of the given schemas"
  },
  "ec2 blob not json": {
    "status": 400,
    "said": "Invalid blob in credential"
  },
  "ec2 blob empty": {
    "status": 400,
    "said": "Expecting to find blob in credential. The server could not comply with the request since it is either malformed or otherwise incorrect. The client is assumed to be in error."
  },
  "ec2 blob without access": {
    "status": 400,
    "said": "Expecting to find access in credential. The server could not comply with the request since it is either malformed or otherwise incorrect. The client is assumed to be in error."
  },
  "cert without user": {
    "status": 400,
    "said": "{'type': 'cert', 'blob': 'x'} is not valid under any of the given schemas"
  },
  "blob not a string": {
    "status": 400,
    "said": "Invalid input for field 'blob'"
  },
  "get cert": {
    "status": 200,
    "said": {
      "level": 5,
      "id": "<cert>",
      "user_id": "<admin>",
      "project_id": null,
      "type": "cert",
      "blob": "hello",
      "links": {
        "self": "<base>/v3/credentials/<cert>"
      }
    }
  },
  "list ec2 of admin": {
    "status": 200,
    "said": [
      "<ec2>"
    ]
  },
  "patch access": {
    "status": 200,
    "said": {
      "id": "<ec2>",
      "user_id": "<admin>",
      "project_id": "<project>",
      "type": "ec2",
      "blob": "{\"access\":\"~-access-2\",\"secret\":\"sekrit\"}",
      "links": {
        "self": "<base>/v3/credentials/<ec2>"
      }
    }
  },
  "patch type": {
    "status": 400,
    "said": "Additional properties are not allowed ('type' was unexpected)"
  },
  "patch nothing": {
    "status": 400,
    "said": "'blob' is a required property"
  },
  "patch bad ec2 blob": {
    "status": 400,
    "said": "Invalid blob in credential"
  },
  "get missing": {
    "status": 404,
    "said": "Could not find credential: no-such-credential."
  },
  "os-ec2 create": {
    "status": 201,
    "said": [
      "access",
      "links",
      "secret",
      "tenant_id",
      "trust_id",
      "user_id"
    ]
  },
  "os-ec2 get": {
    "status": 200,
    "said": {
      "user_id": "<admin>",
      "tenant_id": "<project>",
      "access": "<access>",
      "secret": "<secret>",
      "trust_id": null,
      "links": {
        "self": "<base>/v3/users/<admin>/credentials/OS-EC2/<access>"
      }
    }
  },
  "os-ec2 as v3": {
    "status": 200,
    "said": {
      "id": "<os-ec2>",
      "user_id": "<admin>",
      "project_id": "<project>",
      "type": "ec2",
      "blob": "{\"access\": \"<access>\", \"secret\": \"<secret>\", \"trust_id\": null}",
      "links": {
        "self": "<base>/v3/credentials/<os-ec2>"
      }
    }
  },
  "os-ec2 bad tenant": {
    "status": 404,
    "said": "Could not find project: no-such-project."
  },
  "os-ec2 no tenant": {
    "status": 404,
    "said": "Could not find project: None."
  },
  "os-ec2 unknown user": {
    "status": 404,
    "said": "Could not find user: no-such-user."
  },
  "os-ec2 get missing": {
    "status": 404,
    "said": "Could not find credential: 969f96af5c3350905ecca0542eaf7d03262f1edfb535945202878f3cec8ee794."
  },
  "ec2tokens v4": {
    "status": 200,
    "said": [
      [
        "ec2credential"
      ],
      "<admin>",
      "<project>",
      [
        "audit_ids",
        "catalog",
        "expires_at",
        "is_domain",
        "issued_at",
        "methods",
        "project",
        "roles",
        "user"
      ]
    ]
  },
  "ec2tokens v2": {
    "status": 200,
    "said": [
      [
        "ec2credential"
      ],
      "<admin>",
      "<project>",
      [
        "audit_ids",
        "catalog",
        "expires_at",
        "is_domain",
        "issued_at",
        "methods",
        "project",
        "roles",
        "user"
      ]
    ]
  },
  "ec2tokens bad signature": {
    "status": 401,
    "said": "The request you have made requires authentication."
  },
  "ec2tokens unknown access": {
    "status": 404,
    "said": "Could not find credential: 969f96af5c3350905ecca0542eaf7d03262f1edfb535945202878f3cec8ee794."
  },
  "ec2tokens empty body": {
    "status": 400,
    "said": "request must include a request body"
  },
  "ec2tokens no access": {
    "status": 401,
    "said": "The request you have made requires authentication."
  },
  "s3tokens v1": {
    "status": 200,
    "said": [
      [
        "ec2credential"
      ],
      "<admin>",
      "<project>",
      [
        "audit_ids",
        "catalog",
        "expires_at",
        "is_domain",
        "issued_at",
        "methods",
        "project",
        "roles",
        "user"
      ]
    ]
  },
  "s3tokens bad signature": {
    "status": 401,
    "said": "The request you have made requires authentication."
  },
  "os-ec2 create with a trust-scoped token": {
    "status": 403,
    "said": "You are not authorized to perform the requested action: Delegated tokens cannot access credentials directly."
  },
  "create ec2 naming a trust": {
    "status": 201,
    "said": {
      "access": "~-trusted",
      "secret": "trusted-secret",
      "trust_id": "<trust>"
    }
  },
  "ec2tokens of a trust credential": {
    "status": 200,
    "said": [
      [
        "ec2credential"
      ],
      "<trustee>",
      "<project>",
      {
        "id": "<trust>",
        "trustor_user": {
          "id": "<admin>"
        },
        "trustee_user": {
          "id": "<trustee>"
        },
        "impersonation": false
      },
      [
        "reader"
      ]
    ]
  },
  "ec2tokens after the trust is deleted": {
    "status": 404,
    "said": "Could not find trust: <trust>."
  },
  "os-ec2 delete": {
    "status": 204,
    "said": null
  },
  "os-ec2 delete again": {
    "status": 404,
    "said": "Could not find credential: <os-ec2>."
  },
  "delete cert": {
    "status": 204,
    "said": null
  },
  "get deleted": {
    "status": 404,
    "said": "Could not find credential: <cert>."
  }
};

t.test('this service: credentials, OS-EC2, ec2tokens and s3tokens', async (t) => {
  const testApp = await startTestApp(t);
  await testApp.app.server.listen({ port: 0, host: '127.0.0.1' });
  const address = testApp.app.server.server.address();
  const base = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
  const seen = await scenario(base, ADMIN_PASSWORD, PUBLIC_URL);
  if (process.env.PRINT_SCENARIO) console.error(JSON.stringify(seen, null, 1));
  t.same(seen, KEYSTONE);
});

const skip = (await peerUp()) ? false : `no Keystone peer at ${PEER_URL} (start ../shared/peers/keystone/start.sh)`;

t.test('Keystone 22: credentials, OS-EC2, ec2tokens and s3tokens', { skip }, async (t) => {
  const seen = await scenario(PEER_URL, PEER_PASSWORD);
  if (process.env.PRINT_SCENARIO) console.error(JSON.stringify(seen, null, 1));
  t.same(seen, KEYSTONE);
});
