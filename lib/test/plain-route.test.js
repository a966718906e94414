import assert from 'node:assert/strict';
import { test } from 'node:test';
import { plainPath } from '../src/plain-route.js';

/** @param {string} url @param {string} [method] */
const asked = (url, method = 'GET') => plainPath(/** @type {any} */ ({ url, method }), '/p/', 1, 2);

test('a hot route takes its GET and HEAD in every spelling Express took: segments decoded, one trailing slash', () => {
  assert.deepEqual(asked('/p/abc?width=10'), { segments: ['abc'], search: 'width=10', path: '/p/abc', slash: false });
  assert.deepEqual(asked('/p/abc/caf%C3%A9.jpg', 'HEAD')?.segments, ['abc', 'café.jpg']);
  assert.deepEqual(asked('/p/abc/name.jpg/')?.slash, true);
  assert.deepEqual(asked('/p/a%2Fb')?.segments, ['a/b']);
});

test('what is not its own is left to Express: other methods, paths, segment counts, empty segments', () => {
  for (const [url, method] of [
    ['/p/abc', 'POST'],
    ['/q/abc', 'GET'],
    ['/p/', 'GET'],
    ['/p/a/b/c', 'GET'],
    ['/p//abc', 'GET'],
    ['/p/abc//', 'GET'],
  ])
    assert.equal(asked(url, method), null, `${method} ${url}`);
});

test('a malformed percent-escape is a URIError (a 400 invalid_path, as Express answers it)', () => {
  assert.throws(() => asked('/p/abc/%E0%A4%A'), URIError);
});
