import type { GatewayDeps } from './deps.js';
import { seedFromConfig } from './auth/seed.js';
import { seedProvidersAtStart } from './providers/seed.js';
import { sealStoredDefinitions } from './definition-secrets.js';

/**
 * What a gateway's start writes before it serves: the configuration file's users, channel
 * accounts and model providers imported, and definitions stored before secrets were sealed
 * sealed. Apart from `buildGateway`, which only builds from what it is given: `startGateway`
 * (main and standalone) runs this first, and a test runs it when it wants the file's data.
 * Every step is safe to repeat and to run from replicas starting together.
 */
export async function seedGateway(deps: GatewayDeps): Promise<void> {
  await seedFromConfig({ db: deps.db.db, secrets: deps.secrets, config: deps.config.current, logger: deps.logger });
  await seedProvidersAtStart(deps);
  await sealStoredDefinitions(deps);
}
