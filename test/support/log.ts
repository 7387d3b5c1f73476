import { createLogger } from '../../src/runtime/log.js';

/** Quiet logs in tests; set TEST_LOG_LEVEL=debug to see them. */
export const testLogger = () => createLogger((process.env.TEST_LOG_LEVEL as 'debug' | undefined) ?? 'silent');
