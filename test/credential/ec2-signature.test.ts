import t from 'tap';
import { ec2Signature, requestTimestamp, s3Signature, signaturesEqual } from '../../src/credential/ec2-signature.ts';

// The signature algorithms against AWS's published Signature Version 4 test suite ("get-vanilla",
// "get-vanilla-query-order-key-case") and AWS's S3 REST authentication example (HMAC-SHA1): vectors
// computed by AWS, not by this code.

const SECRET = 'wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY';
const EMPTY_SHA256 = 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855';

function v4(params: Record<string, string>) {
  return {
    params,
    verb: 'GET',
    host: 'example.amazonaws.com',
    path: '/',
    headers: {
      Host: 'example.amazonaws.com',
      'X-Amz-Date': '20150830T123600Z',
      Authorization: 'AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, SignedHeaders=host;x-amz-date, Signature=x',
    },
    body_hash: EMPTY_SHA256,
  };
}

t.test('SigV4: AWS test suite get-vanilla and get-vanilla-query-order-key-case', async (t) => {
  t.equal(ec2Signature(SECRET, v4({})), '5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31');
  t.equal(ec2Signature(SECRET, v4({ Param2: 'value2', Param1: 'value1' })), 'b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500');
  // X-Amz-* query parameters instead of the Authorization header: the same algorithm.
  t.throws(() => ec2Signature(SECRET, { ...v4({}), headers: { 'X-Amz-Date': '20150831T000000Z', Authorization: v4({}).headers.Authorization } }), /date mismatch/);
});

t.test('S3 v1 (HMAC-SHA1): AWS\'s REST authentication example', async (t) => {
  const stringToSign = 'GET\n\n\nTue, 27 Mar 2007 19:36:42 +0000\n/johnsmith/photos/puppy.jpg';
  // The S3 guide's example key differs from the SigV4 suite's by one character.
  t.equal(s3Signature('wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY', Buffer.from(stringToSign).toString('base64url')), 'bWq2s1WEIj+Ydj0vQ697zp+IXMU=');
});

t.test('timestamps: ISO 8601 extended and basic, Keystone\'s parse_isotime', async (t) => {
  t.equal(requestTimestamp({ params: { Timestamp: '2026-11-27T02:44:32Z' } }), Date.UTC(2026, 10, 27, 2, 44, 32));
  t.equal(requestTimestamp({ headers: { 'X-Amz-Date': '20261127T024426Z' } }), Date.UTC(2026, 10, 27, 2, 44, 26));
  t.equal(requestTimestamp({ params: { 'X-Amz-Date': '20261127T024426Z' } }), Date.UTC(2026, 10, 27, 2, 44, 26));
  t.equal(requestTimestamp({ params: { Timestamp: '2026-11-27T04:44:32+02:00' } }), Date.UTC(2026, 10, 27, 2, 44, 32));
  t.equal(requestTimestamp({ params: {} }), undefined, 'none: the check is skipped, as in Keystone');
  t.ok(Number.isNaN(requestTimestamp({ params: { Timestamp: 'yesterday' } })));
  t.ok(Number.isNaN(requestTimestamp({ params: { Timestamp: '2026-02-30T00:00:00Z' } })));
});

t.test('signaturesEqual', async (t) => {
  t.ok(signaturesEqual('abc', 'abc'));
  t.notOk(signaturesEqual('abc', 'abd'));
  t.notOk(signaturesEqual('abc', 'abcd'));
});
