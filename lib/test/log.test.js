import assert from 'node:assert/strict';
import { test } from 'node:test';
import { redactUrl } from '../src/index.js';

test('request URLs are logged without bearer material', () => {
  assert.equal(redactUrl('/hs/eyJhbGciOi.secret'), '/hs/[redacted]');
  assert.equal(redactUrl('/.upload-check/hs/abc?x=1'), '/.upload-check/hs/[redacted]?x=1');
  assert.equal(redactUrl('/p/3q5?width=9&token=0123abcd&format=webp'), '/p/3q5?width=9&token=[redacted]&format=webp');
  assert.equal(redactUrl('/DQmX/photo.jpg'), '/DQmX/photo.jpg');
});
