#!/usr/bin/env bash
# CI (called by .ci/run with PORT): delegation and credentials through the real openstack CLI:
# trust create/list/show/delete with a trust-scoped token (its trust and roles checked by a
# validation; it may make no EC2 credential), ec2 credentials create/list/delete, credential create/list/show/delete.
set -euo pipefail
export OS_AUTH_URL=http://127.0.0.1:$PORT/v3 OS_IDENTITY_API_VERSION=3 OS_USERNAME=admin OS_PASSWORD=admin-secret \
  OS_PROJECT_NAME=admin OS_USER_DOMAIN_NAME=Default OS_PROJECT_DOMAIN_NAME=Default
openstack user create --domain default --password trustee-secret ci-trustee >/dev/null
trust=$(openstack trust create --project admin --role member admin ci-trustee -f value -c id)
openstack trust list -f value -c ID | grep -qx "$trust" || { echo "trust list lacks $trust" >&2; exit 1; }
openstack trust show "$trust" -f value -c project_id >/dev/null
# The trustee's trust-scoped token (keystoneauth's trust_id) names the trust and its roles only.
trust_token=$(OS_USERNAME=ci-trustee OS_PASSWORD=trustee-secret OS_TRUST_ID=$trust OS_PROJECT_NAME= OS_PROJECT_DOMAIN_NAME= \
  openstack token issue -f value -c id)
admin_token=$(openstack token issue -f value -c id)
seen=$(curl -sf "http://127.0.0.1:$PORT/v3/auth/tokens" -H "X-Auth-Token: $admin_token" -H "X-Subject-Token: $trust_token" |
  jq -r '[.token["OS-TRUST:trust"].id, ([.token.roles[].name] | sort | join(","))] | join(" ")')
[ "$seen" = "$trust member,reader" ] || { echo "trust-scoped token: expected '$trust member,reader', got '$seen'" >&2; exit 1; }
# The trust-scoped token mints no EC2 credential (Keystone's security fix: a delegation never makes credentials).
if OS_USERNAME=ci-trustee OS_PASSWORD=trustee-secret OS_TRUST_ID=$trust OS_PROJECT_NAME= OS_PROJECT_DOMAIN_NAME= \
  openstack ec2 credentials create >/dev/null 2>&1; then echo "a trust-scoped token made an EC2 credential" >&2; exit 1; fi
openstack trust delete "$trust"
if openstack trust show "$trust" >/dev/null 2>&1; then echo "the trust outlived its deletion" >&2; exit 1; fi
echo "openstack trust create/list/show/delete, and a trust-scoped token: ok"
access=$(openstack ec2 credentials create -f value -c access)
openstack ec2 credentials list -f value -c Access | grep -qx "$access" || { echo "ec2 credentials list lacks $access" >&2; exit 1; }
openstack ec2 credentials delete "$access"
credential=$(openstack credential create --type cert admin 'ci-cert-blob' -f value -c id)
openstack credential list -f value -c ID | grep -qx "$credential" || { echo "credential list lacks $credential" >&2; exit 1; }
[ "$(openstack credential show "$credential" -f value -c blob)" = ci-cert-blob ] || { echo "credential blob changed" >&2; exit 1; }
openstack credential delete "$credential"
echo "openstack ec2 credentials create/list/delete and credential create/list/show/delete: ok"
