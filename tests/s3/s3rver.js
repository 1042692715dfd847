// Starts the S3-compatible test server; the package lacks the bin file it declares.
require('@20minutes/s3rver/lib/cli').parseAsync();
