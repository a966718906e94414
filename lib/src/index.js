export {
  loadConfig,
  envExample,
  commonSettings,
  sharedSettings,
  hiveSettings,
  purgeQueueSettings,
  takedownSettings,
  whitelistSettings,
} from './config.js';
export {
  HttpError,
  toHttpError,
  errorAnswer,
  errorHandler,
  StartupError,
  GoneError,
  isGone,
  storageFull,
} from './errors.js';
export { createLogger, logRequest, redactUrl, requestIdOf, requestLogger } from './log.js';
export { createRegistry, serveMetrics, requestMetrics, client } from './metrics.js';
export { awaitReplicas, connectRedis, redisReady, subscribe } from './redis.js';
export { runService } from './service.js';
export { base58Url } from './base58-url.js';
export { allowedSizeList } from './sizes.js';
export { createHiveClient } from './hive-rpc.js';
export { isAccountName } from './account-name.js';
export { HEALTH_PATHS, healthRoute } from './health.js';
export { paramsOf } from './params.js';
export { plainRoute } from './plain-route.js';
export { enqueuePurge } from './purge-queue.js';
export {
  avatarCacheKey,
  avatarLastKey,
  AVATAR_INVALIDATE_CHANNEL,
  AVATAR_SIZES,
  COVER_SIZE,
  avatarPaths,
} from './avatars.js';
export { hiveMapping, imageUrl, atPath } from './hive-profile.js';
export { WHITELIST_KEY, recordReferences } from './whitelist.js';
export { isUploadKey, sha256Hex, mendScheme, unwrapOptions, resolveSource } from './sources.js';
export {
  TAKEDOWN_CHANNEL,
  TAKEDOWN_EVICT_CHANNEL,
  TAKEDOWN_KEYS,
  parseEntry,
  entryField,
  entryOf,
  compileList,
  createTakedownList,
  takedownError,
  createServedLog,
  SERVED_KEYS,
} from './takedowns.js';
export {
  RULES,
  backgroundEncodes,
  checkRules,
  degradeDepth,
  transformQueueMax,
  transformSlots,
  transformWorkers,
  warmConcurrency,
  warmQueueMax,
  warmTransforms,
} from './rules.js';
export { cgroupCpuLimit, usableCores } from './cores.js';
export { countWarmBytes, warmBytesKey } from './warm-bytes.js';
export { jsonWithin, textWithin } from './json-within.js';
