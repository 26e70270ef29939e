"""The benchmark's chatflow, made on a fresh Flowise the way its canvas makes one: the first
account registered and logged in, an OpenAI credential, then the flow built from the node
definitions the server itself serves (GET /api/v1/nodes/NAME) — Prompt Template ("Summarize:
{text}", the question as `text`) and ChatOpenAI (base path: the scripted server) into an LLM
Chain — and saved with POST /api/v1/chatflows. Its id is what /api/v1/prediction/ID answers.
"""
import http.cookiejar
import json
import urllib.request

EMAIL, PASSWORD = "bench@example.test", "Bench-passw0rd!"
# The input types Flowise's canvas shows as fields to fill in; any other type is a connection.
PARAMETER_TYPES = {"asyncOptions", "asyncMultiOptions", "options", "multiOptions", "array", "datagrid", "string",
                   "number", "boolean", "password", "json", "code", "date", "file", "folder", "tabs"}


class Session:
    """Requests to Flowise's API as the logged-in person (its cookie), as its canvas sends them."""

    def __init__(self, base):
        self.base = base
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))

    def call(self, method, path, body=None):
        request = urllib.request.Request(
            f"{self.base}{path}", method=method,
            data=None if body is None else json.dumps(body).encode(),
            headers={"content-type": "application/json", "x-request-from": "internal"},
        )
        try:
            with self.opener.open(request, timeout=60) as answer:
                return json.loads(answer.read().decode() or "null")
        except urllib.error.HTTPError as error:
            raise RuntimeError(f"Flowise {method} {path}: {error.code} {error.read().decode()[:400]}") from error


def node(session, name, node_id, inputs, outputs=None, credential=None):
    """A node of `name` as the canvas places it: the server's definition, with its anchors named
    after `node_id`, and the values of `inputs`."""
    definition = session.call("GET", f"/api/v1/nodes/{name}")
    # As the canvas splits a definition's inputs: values typed in (parameters) and connections
    # from other nodes (anchors).
    params, anchors = [], []
    for field in definition.get("inputs", []):
        field = dict(field, id=f"{node_id}-input-{field['name']}-{field['type']}")
        (params if field["type"] in PARAMETER_TYPES else anchors).append(field)
    if definition.get("credential"):
        params.insert(0, dict(definition["credential"], id=f"{node_id}-input-credential-credential"))
    data = dict(definition, id=node_id, inputs=inputs, outputs=outputs or {}, selected=False,
                inputParams=params, inputAnchors=anchors)
    data["outputAnchors"] = [{
        "id": f"{node_id}-output-{name}-{'|'.join(definition['baseClasses'])}",
        "name": name, "label": definition["label"], "type": " | ".join(definition["baseClasses"]),
    }]
    if credential:
        data["credential"] = credential
        data["inputs"]["credential"] = credential
    return {"id": node_id, "type": "customNode", "position": {"x": 0, "y": 0}, "data": data,
            "width": 300, "height": 500}


def edge(source, target, input_name, input_type):
    source_anchor = source["data"]["outputAnchors"][0]["id"]
    target_handle = f"{target['id']}-input-{input_name}-{input_type}"
    return {"source": source["id"], "sourceHandle": source_anchor, "target": target["id"],
            "targetHandle": target_handle, "type": "buttonedge",
            "id": f"{source['id']}-{source_anchor}-{target['id']}-{target_handle}"}


def create_chatflow(base, llm_url):
    session = Session(base)
    session.call("POST", "/api/v1/account/register",
                 {"user": {"name": "bench", "email": EMAIL, "credential": PASSWORD}})
    session.call("POST", "/api/v1/auth/login", {"email": EMAIL, "password": PASSWORD})
    credential = session.call("POST", "/api/v1/credentials", {
        "name": "scripted", "credentialName": "openAIApi", "plainDataObj": {"openAIApiKey": "sk-bench-not-a-key"}})
    prompt = node(session, "promptTemplate", "promptTemplate_0", {
        "template": "Summarize: {text}", "promptValues": json.dumps({"text": "{{question}}"})})
    model = node(session, "chatOpenAI", "chatOpenAI_0", {
        "modelName": "gpt-4o-mini", "temperature": 0, "basepath": llm_url}, credential=credential["id"])
    chain = node(session, "llmChain", "llmChain_0", {
        "model": "{{chatOpenAI_0.data.instance}}", "prompt": "{{promptTemplate_0.data.instance}}",
        "outputParser": "", "chainName": "", "inputModeration": ""}, outputs={"output": "llmChain"})
    flow = {"nodes": [prompt, model, chain],
            "edges": [edge(model, chain, "model", "BaseLanguageModel"),
                      edge(prompt, chain, "prompt", "BasePromptTemplate")],
            "viewport": {"x": 0, "y": 0, "zoom": 1}}
    saved = session.call("POST", "/api/v1/chatflows", {
        "name": "summarize", "flowData": json.dumps(flow), "deployed": False, "isPublic": False,
        "type": "CHATFLOW"})
    return saved["id"]
