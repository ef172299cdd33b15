/**
 * What a definition (an agent, a rule chain, a skill, a workspace file) is and may be, with no
 * executor: the public surface other packages import, named one by one. The engine implements
 * the node types and built-in tools specified here; the gateway checks and stores definitions
 * with this alone.
 */
export { agentConfigProblems, agentUnknownFieldHint, AiAgentConfiguration, DEFAULT_TOOL_TIMEOUT_MS, McpToolConfig, MIN_TOOL_TIMEOUT_MS, toolCapability, toolTimeoutProblem, type AgentToolConfig, type AiAgentConfig, type HeartbeatConfig } from './agent-config.js';
export { definitionReferences, definitionRefusals, templatedAuthorityFields, type DefinitionReference } from './authority/definition.js';
export { assertAllowed, AUTHORITY, chainSharing, enter, networkOpener, ownerIsAdmin, powerRefusal, principalRole, refusal, subagentRefusal, timeOf, toolPower, type Capability, type RunAuthority, type SubagentTarget } from './authority/policy.js';
export { ChainCache, parseChain, type LoadResult, type ParsedChain, type StoredChain } from './chain-cache.js';
export { chainVars, fillChainVars, toMetadataValue, type ChainVars } from './chain-vars.js';
export { holdsSecrets, isSecretHeader, isSecretKey, isSecretUrl, redactDefinition, sealDefinition, SEALED_PREFIX, sealStoredPlaintext, SECRET_MARKER, unsealDefinition, type SecretSealer } from './definition-secrets.js';
export { AGENT_NODE_TYPE, chainCategory, Id, ID_PATTERN, ID_REGEX, isAgentChain, normalizeRuleChain, RuleChainDsl, RuleChainInput, RuleChainUpdate, RuleConnection, RuleNode, schemaErrors, schemaProblems, type ChainIdSource, type NormalizedChain, type SchemaProblem, type UnknownFieldHint } from './dsl.js';
export { compileExpr, evalExpr, ExprError, MAX_EXPR_LENGTH, MAX_EXPR_STRING, stableJson } from './expr.js';
export { defaultModelOf, resolveModel } from './models.js';
export { aiAgentSpec, aiLlmSpec, commentSpec, defineNodeSpec, delaySpec, endSpec, exprFilterSpec, exprSwitchSpec, exprTransformSpec, fieldFilterSpec, flowSpec, forkSpec, groupFilterSpec, joinSpec, jsFilterSpec, jsSwitchSpec, jsTransformSpec, logSpec, MAX_DELAY_MS, metadataTransformSpec, msgTypeSwitchSpec, nodeSpecs, restApiCallSpec, type NodeSpec } from './nodes/index.js';
export { readSkillArchive } from './skills/archive.js';
export { MAX_SKILL_BYTES, parseSkillMarkdown, SKILL_NAME_PATTERN, SKILL_NAME_REGEX, SkillFormatError } from './skills/markdown.js';
export { readZipDirectory, unsafeEntryName, type ZipEntryInfo } from './skills/zip.js';
export { agentTemplate, DEFAULT_SYSTEM_PROMPT, defaultWorkspaceFiles, type WorkspaceFile } from './template.js';
export { toolForms, toolList } from './tools/forms.js';
export { bashSpec, builtinToolSpecs, cronSpec, defaultBuiltinToolNames, editSpec, globSpec, grepSpec, httpFetchSpec, readSpec, sendMessageSpec, skillSpec, writeSpec } from './tools/index.js';
export { StringEnum } from './tools/schema.js';
export { defineToolSpec, type ToolSpec } from './tools/types.js';
export { FIELD_VALIDATIONS, validateRuleChain, type FieldValidation } from './validate.js';
export { ancestorPaths, baseName, normaliseWorkspacePath, parentPath, unsafeNameCharacter } from './workspace-path.js';
