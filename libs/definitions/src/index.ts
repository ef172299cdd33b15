/**
 * What a definition (an agent, a rule chain, a skill, a workspace file) is and may be, with no
 * executor: the public surface other packages import, named one by one. The engine implements
 * the node types and built-in tools specified here; the gateway checks and stores definitions
 * with this alone.
 */
export { DEFAULT_TOOL_TIMEOUT_MS, McpToolConfig, toolCapability, toolTimeoutProblem, type AgentToolConfig, type AiAgentConfig, type HeartbeatConfig } from './agent-config.js';
export { definitionReferences, definitionRefusals } from './authority/definition.js';
export { assertAllowed, chainSharing, enter, ownerIsAdmin, powerRefusal, refusal, subagentRefusal, timeOf, type Capability, type RunAuthority } from './authority/policy.js';
export { ChainCache, parseChain, type LoadResult, type ParsedChain, type StoredChain } from './chain-cache.js';
export { fillChainVars } from './chain-vars.js';
export { holdsSecrets, isSecretHeader, isSecretKey, isSecretUrl, redactDefinition, sealDefinition, SEALED_PREFIX, sealStoredPlaintext, SECRET_MARKER, unsealDefinition, type SecretSealer } from './definition-secrets.js';
export { chainCategory, normalizeRuleChain, RuleChainDsl, RuleChainInput, RuleChainUpdate, RuleNode } from './dsl.js';
export { evalExpr, MAX_EXPR_LENGTH, stableJson } from './expr.js';
export { defaultModelOf, resolveModel } from './models.js';
export { aiAgentSpec, aiLlmSpec, commentSpec, delaySpec, endSpec, exprFilterSpec, exprSwitchSpec, exprTransformSpec, fieldFilterSpec, flowSpec, forkSpec, groupFilterSpec, joinSpec, jsFilterSpec, jsSwitchSpec, jsTransformSpec, logSpec, MAX_DELAY_MS, metadataTransformSpec, msgTypeSwitchSpec, nodeSpecs, restApiCallSpec, type NodeSpec } from './nodes/index.js';
export { readSkillArchive } from './skills/archive.js';
export { parseSkillMarkdown, SkillFormatError } from './skills/markdown.js';
export { readZipDirectory } from './skills/zip.js';
export { agentTemplate, DEFAULT_SYSTEM_PROMPT, defaultWorkspaceFiles } from './template.js';
export { toolForms, toolList } from './tools/forms.js';
export { bashSpec, builtinToolSpecs, cronSpec, defaultBuiltinToolNames, editSpec, globSpec, grepSpec, httpFetchSpec, readSpec, sendMessageSpec, skillSpec, writeSpec } from './tools/index.js';
export { validateRuleChain, type FieldValidation } from './validate.js';
export { ancestorPaths, baseName, normaliseWorkspacePath, parentPath } from './workspace-path.js';
