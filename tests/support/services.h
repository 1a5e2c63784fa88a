/*
 * services.h - the tests' name for the lab services (apps/common/lab_services.h:
 * echo and line, run under every model) and the client that speaks their
 * protocol (apps/common/line_client.h). They live in apps/common/ because
 * cabrank-bench ships them; test code includes them from here.
 */
#ifndef CABRANK_TEST_SERVICES_H
#define CABRANK_TEST_SERVICES_H

#include "../../apps/common/lab_services.h"
#include "../../apps/common/line_client.h"

#endif /* CABRANK_TEST_SERVICES_H */
