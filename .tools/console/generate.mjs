// Generates gen/openapi.d.ts from the gateway's published document, as an integrator would, with
// openapi-typescript's Node API: the only option is the documented Blob transform for
// `format: binary`, so multipart file parts are typed as the Blob that FormData takes.
import fs from "node:fs";
import openapiTS, { astToString } from "openapi-typescript";
import ts from "typescript";

const BLOB = ts.factory.createTypeReferenceNode(ts.factory.createIdentifier("Blob"));
const document = new URL("../../openapi/openapi.yaml", import.meta.url);
const ast = await openapiTS(document, {
  transform(schemaObject) {
    if (schemaObject.format === "binary") {
      return BLOB;
    }
    return undefined;
  },
});
fs.mkdirSync(new URL("gen/", import.meta.url), { recursive: true });
fs.writeFileSync(new URL("gen/openapi.d.ts", import.meta.url), astToString(ast));
console.log("generated gen/openapi.d.ts");
