-- Asterisk's PJSIP realtime tables as its Alembic migrations
-- (contrib/ast-db-manage/config/versions) leave them in PostgreSQL: the
-- same table and column names and types, written for qualifyd's tests.
-- Only some of ps_endpoints' many columns are here, among them ones
-- qualifyd does not read, which must not disturb the import.
CREATE TYPE yesno_values AS ENUM ('yes', 'no');
CREATE TYPE ast_bool_values AS ENUM ('0', '1', 'off', 'on', 'false', 'true', 'no', 'yes');
CREATE TYPE pjsip_auth_type_values_v2 AS ENUM ('md5', 'userpass', 'google_oauth');
CREATE TYPE pjsip_dtmf_mode_values_v3 AS ENUM ('rfc4733', 'inband', 'info', 'auto', 'auto_info');

CREATE TABLE ps_aors (
    id VARCHAR(255) NOT NULL UNIQUE,
    contact VARCHAR(255),
    default_expiration INTEGER,
    mailboxes VARCHAR(80),
    max_contacts INTEGER,
    minimum_expiration INTEGER,
    remove_existing ast_bool_values,
    qualify_frequency INTEGER,
    authenticate_qualify ast_bool_values,
    maximum_expiration INTEGER,
    outbound_proxy VARCHAR(255),
    support_path ast_bool_values,
    qualify_timeout FLOAT,
    voicemail_extension VARCHAR(40),
    remove_unavailable ast_bool_values,
    qualify_2xx_only ast_bool_values
);
CREATE INDEX ps_aors_id ON ps_aors (id);
CREATE INDEX ps_aors_qualifyfreq_contact ON ps_aors (qualify_frequency, contact);

CREATE TABLE ps_endpoints (
    id VARCHAR(255) NOT NULL UNIQUE,
    transport VARCHAR(40),
    aors VARCHAR(2048),
    auth VARCHAR(255),
    context VARCHAR(40),
    disallow VARCHAR(200),
    allow VARCHAR(200),
    direct_media ast_bool_values,
    dtmf_mode pjsip_dtmf_mode_values_v3,
    outbound_auth VARCHAR(255),
    outbound_proxy VARCHAR(255),
    rewrite_contact ast_bool_values,
    from_domain VARCHAR(40),
    from_user VARCHAR(40),
    tenantid VARCHAR(80)
);
CREATE INDEX ps_endpoints_id ON ps_endpoints (id);

CREATE TABLE ps_auths (
    id VARCHAR(255) NOT NULL UNIQUE,
    auth_type pjsip_auth_type_values_v2,
    nonce_lifetime INTEGER,
    md5_cred VARCHAR(40),
    password VARCHAR(80),
    realm VARCHAR(255),
    username VARCHAR(40),
    refresh_token VARCHAR(255),
    oauth_clientid VARCHAR(255),
    oauth_secret VARCHAR(255),
    password_digest VARCHAR(1024),
    supported_algorithms_uas VARCHAR(1024),
    supported_algorithms_uac VARCHAR(1024)
);
CREATE INDEX ps_auths_id ON ps_auths (id);
