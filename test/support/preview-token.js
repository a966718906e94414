// A preview token as POST /proxy-auth issues it (its route has its own tests: test/compat.test.js), put straight
// into Redis for tests of what the token opens.
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { previewTokenKey } from '../../origin/src/routes/proxy-auth.js';

/** A new token of `account`, valid half an hour. @param {string} redisUrl @param {string} [account] */
export async function issuePreviewToken(redisUrl, account = 'alice') {
  const token = randomBytes(24).toString('hex');
  const redis = new Redis(redisUrl, { lazyConnect: true, maxRetriesPerRequest: 1 });
  try {
    await redis.set(previewTokenKey(token), account, 'EX', 1800);
  } finally {
    redis.disconnect();
  }
  return token;
}
