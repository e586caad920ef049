// Everything a plugin needs.
#pragma once

#include "embedflow/array.hpp"
#include "embedflow/component.hpp"
#include "embedflow/error.hpp"
#include "embedflow/log.hpp"
#include "embedflow/node.hpp"
#include "embedflow/parallel.hpp"
#include "embedflow/params.hpp"
#include "embedflow/plugin.hpp"
#include "embedflow/record.hpp"
#include "embedflow/registry.hpp"
#include "embedflow/rng.hpp"
#include "embedflow/schema.hpp"
#include "embedflow/value.hpp"
#include "embedflow/version.hpp"
