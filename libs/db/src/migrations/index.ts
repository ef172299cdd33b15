import type { Migration } from 'kysely';
import * as settings from './20261122T000000_settings.js';

/**
 * Every migration, by name. Listed by hand rather than read from the folder so the set is the
 * same under tsx, compiled JS and bundles. Names are `YYYYMMDDTHHMMSS_topic` (UTC) and run in
 * name order; add new ones at the end, never edit or rename an applied one.
 */
export const migrations: Record<string, Migration> = {
  '20261122T000000_settings': settings,
};
