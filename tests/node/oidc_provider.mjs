// A certified OpenID Connect provider (the npm `oidc-provider`) for the sign-in tests.
// Configured from the environment:
//   OP_ISSUER     the issuer URL it serves (http://127.0.0.1:PORT), OP_PORT its port
//   OP_CLIENTS    JSON list of clients: client_id, client_secret, redirect_uris,
//                 post_logout_redirect_uris
//   OP_ACCOUNTS   a JSON file, read at every lookup: {login: {email, email_verified, groups,
//                 preferred_username, disabled}}; a missing or disabled login has no account
//   OP_CODE_TTL   seconds an authorization code lives (default 60)
// Its development sign-in form takes any password; consent is granted to the known clients
// (first-party apps), so the flow is: form, then straight back to the client.
import { readFileSync } from 'node:fs';
import Provider, { interactionPolicy } from 'oidc-provider';

const issuer = process.env.OP_ISSUER;
const port = Number(process.env.OP_PORT);
const accountsFile = process.env.OP_ACCOUNTS;
const codeTtl = Number(process.env.OP_CODE_TTL || 60);
const clients = JSON.parse(process.env.OP_CLIENTS).map((client) => ({
  grant_types: ['authorization_code'],
  response_types: ['code'],
  token_endpoint_auth_method: 'client_secret_post',
  ...client,
}));

// A person disabled here since they signed in must sign in again, which a silent request
// (prompt=none) answers with login_required, as a company's provider does.
const { base, Check } = interactionPolicy;
const policy = base();
policy.get('login').checks.add(new Check(
  'account_gone', 'the account is no longer active', 'login_required',
  (ctx) => (ctx.oidc.session.accountId && !ctx.oidc.account
    ? Check.REQUEST_PROMPT : Check.NO_NEED_TO_PROMPT),
));

function accounts() {
  return JSON.parse(readFileSync(accountsFile, 'utf8'));
}

const provider = new Provider(issuer, {
  clients,
  pkce: { required: () => true },
  scopes: ['openid', 'email', 'profile', 'groups'],
  claims: {
    openid: ['sub'],
    email: ['email', 'email_verified'],
    profile: ['preferred_username', 'given_name', 'family_name'],
    groups: ['groups'],
  },
  ttl: {
    AuthorizationCode: codeTtl,
    AccessToken: 600,
    IdToken: 600,
    Grant: 3600,
    Interaction: 600,
    Session: 3600,
  },
  cookies: { keys: ['parley-tests-only-cookie-key'] },
  interactions: { policy },
  features: { devInteractions: { enabled: true }, rpInitiatedLogout: { enabled: true } },
  async findAccount(ctx, id) {
    const found = accounts()[id];
    if (!found || found.disabled) return undefined;
    return {
      accountId: id,
      async claims() {
        const { disabled, ...claims } = found;
        return { sub: id, ...claims };
      },
    };
  },
  async loadExistingGrant(ctx) {
    const grantId = ctx.oidc.result?.consent?.grantId
      || ctx.oidc.session.grantIdFor(ctx.oidc.client.clientId);
    if (grantId) return ctx.oidc.provider.Grant.find(grantId);
    const grant = new ctx.oidc.provider.Grant({
      clientId: ctx.oidc.client.clientId,
      accountId: ctx.oidc.session.accountId,
    });
    grant.addOIDCScope('openid email profile groups');
    await grant.save();
    return grant;
  },
});

provider.on('server_error', (ctx, error) => console.error('server_error', error));

provider.listen(port, '127.0.0.1', () => {
  console.log(`ready ${issuer}`);
});
