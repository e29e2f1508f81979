"""Signs requests with botocore (an independent AWS signer) for the ec2tokens/s3tokens tests.

Reads one JSON object on stdin (or, with --serve, one per line), writes the `credentials` body Keystone's /v3/ec2tokens or
/v3/s3tokens takes. Modes: ec2-v4 (SigV4Auth, Authorization header), ec2-v2 (SigV2Auth, query
parameters), s3-v1 (HmacV1Auth), s3-v4 (SigV4Auth for s3: its string to sign).
"""
import base64
import datetime
import hashlib
import json
import sys
from urllib.parse import urlsplit

import botocore.auth
from botocore.auth import HmacV1Auth, SigV2Auth, SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

when = None

class FixedDateTime(datetime.datetime):
    @classmethod
    def utcnow(cls):
        return when

    @classmethod
    def now(cls, tz=None):
        return when.replace(tzinfo=tz) if tz else when


botocore.auth.datetime.datetime = FixedDateTime
botocore.auth.time.gmtime = lambda *_: when.timetuple()


def sign(a):
    global when
    creds = Credentials(a['access'], a['secret'])
    mode = a['mode']
    host = a.get('host', 'ec2.example.com:8773')
    path = a.get('path', '/')
    verb = a.get('verb', 'GET')
    params = a.get('params', {})
    body = a.get('body', '')
    when = datetime.datetime.strptime(a['date'], '%Y%m%dT%H%M%SZ')

    def request():
        return AWSRequest(method=verb, url='http://%s%s' % (host, path), params=dict(params), data=body)


    if mode in ('ec2-v4', 's3-v4'):
        req = request()
        signer = SigV4Auth(creds, 's3' if mode == 's3-v4' else a.get('service', 'ec2'), a.get('region', 'RegionOne'))
        # The string botocore signs, as it signs it.
        signed_strings = []
        sign_string = signer.signature
        signer.signature = lambda string_to_sign, req: signed_strings.append(string_to_sign) or sign_string(string_to_sign, req)
        signer.add_auth(req)
        signature = req.headers['Authorization'].split('Signature=')[1]
        if mode == 'ec2-v4':
            headers = dict(req.headers.items())
            headers['Host'] = host
            out = {'access': a['access'], 'signature': signature, 'host': host, 'verb': verb, 'path': path,
                   'params': params, 'headers': headers, 'body_hash': hashlib.sha256(body.encode()).hexdigest()}
        else:
            out = {'access': a['access'], 'signature': signature,
                   'token': base64.urlsafe_b64encode(signed_strings[0].encode()).decode()}
    elif mode == 'ec2-v2':
        req = request()
        SigV2Auth(creds).add_auth(req)
        signed = dict(req.params)
        signature = signed.pop('Signature')
        out = {'access': a['access'], 'signature': signature, 'host': host, 'verb': verb, 'path': path,
               'params': signed, 'headers': {}, 'body_hash': ''}
    elif mode == 's3-v1':
        req = AWSRequest(method=verb, url='http://%s%s' % (host, path), headers={'Date': a.get('http_date', 'Tue, 27 Mar 2007 19:36:42 +0000')})
        signer = HmacV1Auth(creds)
        split = urlsplit(req.url)
        string_to_sign = signer.canonical_string(verb, split, req.headers, auth_path=path)
        out = {'access': a['access'], 'signature': signer.get_signature(verb, split, req.headers, auth_path=path),
               'token': base64.urlsafe_b64encode(string_to_sign.encode()).decode()}
    else:
        raise ValueError('unknown mode %s' % mode)
    return out


if __name__ == '__main__':
    if sys.argv[1:] == ['--serve']:
        # One JSON object a line in, one a line out ({"result": …} or {"error": …}), until stdin ends:
        # a test file signs everything through one interpreter (botocore takes a while to import).
        for line in sys.stdin:
            try:
                answer = {'result': sign(json.loads(line))}
            except Exception as error:  # reported to the test, which fails on it
                answer = {'error': '%s: %s' % (type(error).__name__, error)}
            sys.stdout.write(json.dumps(answer) + '\n')
            sys.stdout.flush()
    else:
        print(json.dumps(sign(json.load(sys.stdin))))
