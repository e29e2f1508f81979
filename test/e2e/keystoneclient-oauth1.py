"""keystoneclient's OS-OAUTH1 flow against a Keystone endpoint (argv: auth_url admin_password).

Creates a consumer, gets a request token for the admin project, authorizes it with the reader role,
exchanges it for an access token, authenticates with keystoneauth1's V3OAuth1 plugin, lists the
admin's access tokens, and deletes what it made. Prints one JSON line of what it saw.
"""
import json
import sys

from keystoneauth1 import session
from keystoneauth1.extras import oauth1 as oauth1_auth
from keystoneauth1.identity import v3
from keystoneclient.v3 import client

url, password = sys.argv[1], sys.argv[2]
admin = session.Session(auth=v3.Password(auth_url=url, username='admin', password=password, project_name='admin',
                                         user_domain_id='default', project_domain_id='default'))
ks = client.Client(session=admin)
project_id = admin.get_project_id()
user_id = admin.get_user_id()
reader = [r for r in ks.roles.list() if r.name == 'reader'][0]
consumer = ks.oauth1.consumers.create(description='keystoneclient-oauth1')
seen = {}
try:
    request_token = ks.oauth1.request_tokens.create(consumer.id, consumer.secret, project_id)
    authorized = ks.oauth1.request_tokens.authorize(request_token.key, [reader.id])
    access_token = ks.oauth1.access_tokens.create(consumer.id, consumer.secret, request_token.key, request_token.secret,
                                                   authorized.oauth_verifier)
    delegated = session.Session(auth=oauth1_auth.V3OAuth1(url, consumer_key=consumer.id, consumer_secret=consumer.secret,
                                                          access_key=access_token.key, access_secret=access_token.secret))
    access = delegated.auth.get_access(delegated)
    seen['token_methods'] = access._data['token']['methods']
    seen['token_roles'] = sorted(access.role_names)
    seen['token_project'] = access.project_id == project_id
    seen['token_user'] = access.user_id == user_id
    seen['oauth'] = {'access_token_id': access.oauth_access_token_id == access_token.key,
                     'consumer_id': access.oauth_consumer_id == consumer.id}
    # keystoneclient has no working list of access tokens (its URL is not Keystone's): asked directly.
    listed = admin.get('/users/%s/OS-OAUTH1/access_tokens' % user_id, endpoint_filter={'interface': 'public', 'service_type': 'identity'},
                       endpoint_override=url).json()['access_tokens']
    seen['listed'] = [t['id'] == access_token.key for t in listed if t['id'] == access_token.key]
finally:
    ks.oauth1.consumers.delete(consumer.id)
print(json.dumps(seen, sort_keys=True))
