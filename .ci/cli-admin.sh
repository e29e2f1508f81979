#!/usr/bin/env bash
# CI (called by .ci/run with PORT and WORK): the rest of the administrative v3 API through the real
# openstack CLI (issue 20): a region created with an id and an endpoint in it, a domain-specific role
# and an implied role, registered limits and limits, and an endpoint group whose project sees only
# its endpoints in its catalog.
set -euo pipefail
export OS_AUTH_URL=http://127.0.0.1:$PORT/v3 OS_IDENTITY_API_VERSION=3 OS_USERNAME=admin OS_PASSWORD=admin-secret \
  OS_PROJECT_NAME=admin OS_USER_DOMAIN_NAME=Default OS_PROJECT_DOMAIN_NAME=Default

openstack region create ci-region >/dev/null
service=$(openstack service create --name ci-compute ci-compute -f value -c id)
endpoint=$(openstack endpoint create --region ci-region "$service" public http://ci-compute.example/v2 -f value -c id)
[ "$(openstack endpoint show "$endpoint" -f value -c region)" = ci-region ] || { echo "the endpoint is not in ci-region" >&2; exit 1; }
other_service=$(openstack service create --name ci-other ci-other -f value -c id)
openstack endpoint create --region ci-region "$other_service" public http://ci-other.example/ >/dev/null
echo "openstack region create + endpoint create --region: ok"

openstack role create --domain default ci-domain-role >/dev/null
openstack role create ci-prior >/dev/null
openstack implied role create ci-prior --implied-role member >/dev/null
openstack implied role list -f value | grep -q 'ci-prior' || { echo "the implied role is missing" >&2; exit 1; }
echo "openstack role create --domain, implied role create/list: ok"

openstack registered limit create --service ci-compute --default-limit 10 --region ci-region cores >/dev/null
openstack limit create --project admin --service ci-compute --resource-limit 20 --region ci-region cores >/dev/null
[ "$(openstack limit list --service ci-compute -f value -c 'Resource Limit')" = 20 ] || { echo "the limit is missing" >&2; exit 1; }
echo "openstack registered limit create, limit create/list: ok"

# An endpoint group for ci-compute's endpoints; a project associated with it sees only those.
printf '{"service_id": "%s"}\n' "$service" >"$WORK/endpoint-filter.json"
openstack project create --domain default ci-filtered >/dev/null
openstack role add --user admin --project ci-filtered member
openstack endpoint group create ci-group "$WORK/endpoint-filter.json" >/dev/null
openstack endpoint group add project ci-group ci-filtered
services=$(OS_PROJECT_NAME=ci-filtered openstack catalog list -f value -c Name | sort | tr '\n' ' ')
echo "catalog of ci-filtered: $services"
[ "$services" = "ci-compute " ] || { echo "the filtered project's catalog should hold ci-compute only" >&2; exit 1; }
echo "openstack endpoint group create/add project, catalog list with a filtered project: ok"
