# server/store/lua/scripts.cmake: embeds the store's Lua scripts at configure time (included by
# server/CMakeLists.txt) and generates from their headers the one contract C++ and Lua share.
#
# The table store/lua/scripts.txt gives each script's name, KEYS and ARGV counts and flags; each
# script is prefixed with the prelude (prelude/*.lua, in name order, then migrations/*.lua). They
# are embedded twice: each script on its own (prelude + file: EVAL/EVALSHA), and all of them as one
# Redis Functions library (lua::kFunctionLibrary: the prelude once, then each file's code as the
# body of a registered function). The library and its functions are named after a hash of the
# library's code (orderhold_<12 hex>, orderhold_<12 hex>_<script>): Redis' function names are
# global, so two releases running side by side during a rolling upgrade each call their own code.
# The library runs the prelude once per load, so each function first resets the prelude's
# per-call state (begin_call in prelude/48_events.lua). The migrations of data earlier releases
# wrote (migrations/*.lua) register themselves in the prelude (`migrations`), so deleting one
# such file removes its migration and nothing else has to change. Editing any of these files
# re-runs configure.
#
# Named contracts. A script's header (its leading "--" lines) names its arguments and its reply,
# in order, one line each:
#   -- KEYS[n]  ... or -- KEYS[1..n]     its keys, by position (the store builds them from keys.h)
#   -- ARGV <name>  ...                  the next argument; "-- ARGV <name>...": the variable tail
#   -- REPLY <name> <type>  ...          the next element of the array it returns;
#                                        "<name>..." : every element left (the tail)
#   -- RETURN <name> <type>  ...         a script that returns one value, not an array
# <type>: int (a Lua number, or a string of one, as Redis returns scores), str (a string), array
# (a nested array), any (anything). Continuation lines ("--" and spaces) document the line above.
# From them this file generates, per script (lua_scripts.h, namespace orderhold::store::lua):
#   <Name>Argv<A>   the arguments by name, in order: the store fills it with designated
#                   initializers (internal::Eval), so a missing or misplaced one does not compile;
#   <Name>Reply     the reply by name (int -> int64_t, str -> string_view, array and the tail ->
#                   a span of the reply's elements, any -> the element), with Parse(reply, &out),
#                   which answers one INTERNAL error naming the element for a reply of another shape;
# and the Lua table `A` (local A = {user = ARGV[1], ...}) at the top of the script's body, so
# that the script reads A.user, never ARGV[1]. The counts must match scripts.txt's, or configure
# stops.
set(ORDERHOLD_LUA_DIR "${CMAKE_CURRENT_LIST_DIR}")
set(ORDERHOLD_LUA_HEADER "${CMAKE_CURRENT_BINARY_DIR}/generated/server/store/lua_scripts.h")
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${ORDERHOLD_LUA_DIR}/scripts.txt")
file(STRINGS "${ORDERHOLD_LUA_DIR}/scripts.txt" lua_table REGEX "^[a-z]")
set(prelude "")
file(GLOB lua_prelude_parts CONFIGURE_DEPENDS "${ORDERHOLD_LUA_DIR}/prelude/*.lua")
list(SORT lua_prelude_parts)
file(GLOB lua_migrations CONFIGURE_DEPENDS "${ORDERHOLD_LUA_DIR}/migrations/*.lua")
list(SORT lua_migrations)
foreach(part IN LISTS lua_prelude_parts lua_migrations)
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${part}")
  file(READ "${part}" part_code)
  string(APPEND prelude "${part_code}")
endforeach()

# CamelCase of a snake_case name ("place_hold" -> "PlaceHold").
function(orderhold_lua_camel snake out)
  string(REPLACE "_" ";" parts "${snake}")
  set(camel "")
  foreach(part IN LISTS parts)
    string(SUBSTRING "${part}" 0 1 first)
    string(TOUPPER "${first}" first)
    string(SUBSTRING "${part}" 1 -1 rest)
    string(APPEND camel "${first}${rest}")
  endforeach()
  set(${out} "${camel}" PARENT_SCOPE)
endfunction()

# Reads the contract of `script` from its header `content`. Sets in the caller: lua_keys (the
# highest n of KEYS[n]), lua_args (names of the fixed arguments), lua_tail (the tail's name or ""),
# lua_replies (name:type of each fixed element), lua_reply_tail (name:type or ""), lua_scalar
# (TRUE for a RETURN).
function(orderhold_lua_contract script content)
  string(REGEX MATCH "^(--[^\n]*\n)*" header "${content}")
  string(REPLACE ";" "," header "\n${header}")
  # The directive and up to two words after it (no description: it may hold brackets, which CMake
  # lists do not split inside).
  string(REGEX MATCHALL "\n-- (KEYS\\[[0-9.]+\\]|ARGV|REPLY|RETURN)[^ \n]*( [^ \n]+)?( [^ \n]+)?"
         lines "${header}")
  list(TRANSFORM lines STRIP)
  set(keys 0)
  set(args "")
  set(tail "")
  set(replies "")
  set(reply_tail "")
  set(scalar FALSE)
  foreach(line IN LISTS lines)
    if(line MATCHES "^-- KEYS\\[([0-9]+\\.\\.)?([0-9]+)\\]")  # KEYS[n] or KEYS[1..n]
      if(CMAKE_MATCH_2 GREATER keys)
        set(keys ${CMAKE_MATCH_2})
      endif()
    elseif(line MATCHES "^-- ARGV")
      if(NOT line MATCHES "^-- ARGV ([a-z][a-z0-9_]*)(\\.\\.\\.)?( |$)")
        message(FATAL_ERROR "store/lua/${script}.lua: cannot read '${line}' (-- ARGV <name>)")
      endif()
      if(tail)
        message(FATAL_ERROR "store/lua/${script}.lua: an ARGV after the tail ${tail}")
      endif()
      if(CMAKE_MATCH_2)
        set(tail "${CMAKE_MATCH_1}")
      else()
        list(APPEND args "${CMAKE_MATCH_1}")
      endif()
    elseif(line MATCHES "^-- (REPLY|RETURN)")
      if(NOT line MATCHES "^-- (REPLY|RETURN) ([a-z][a-z0-9_]*)(\\.\\.\\.)? (int|str|array|any)( |$)")
        message(FATAL_ERROR "store/lua/${script}.lua: cannot read '${line}' "
          "(-- REPLY <name> int|str|array|any)")
      endif()
      if(reply_tail OR scalar)
        message(FATAL_ERROR "store/lua/${script}.lua: a reply element after the last: '${line}'")
      endif()
      if(CMAKE_MATCH_1 STREQUAL "RETURN")
        if(replies)
          message(FATAL_ERROR "store/lua/${script}.lua: RETURN beside REPLY lines")
        endif()
        set(scalar TRUE)
        list(APPEND replies "${CMAKE_MATCH_2}:${CMAKE_MATCH_4}")
      elseif(CMAKE_MATCH_3)
        set(reply_tail "${CMAKE_MATCH_2}:${CMAKE_MATCH_4}")
      else()
        list(APPEND replies "${CMAKE_MATCH_2}:${CMAKE_MATCH_4}")
      endif()
    endif()
  endforeach()
  if(NOT replies AND NOT reply_tail)
    message(FATAL_ERROR "store/lua/${script}.lua: its header names no REPLY or RETURN")
  endif()
  set(lua_keys ${keys} PARENT_SCOPE)
  set(lua_args "${args}" PARENT_SCOPE)
  set(lua_tail "${tail}" PARENT_SCOPE)
  set(lua_replies "${replies}" PARENT_SCOPE)
  set(lua_reply_tail "${reply_tail}" PARENT_SCOPE)
  set(lua_scalar ${scalar} PARENT_SCOPE)
endfunction()

# The C++ of one script's contract (the variables orderhold_lua_contract set), into `out`.
function(orderhold_lua_contract_cpp script name out)
  list(LENGTH lua_args argc)
  set(cpp "// ${script}.lua's arguments, by name (its header's ARGV lines, in order).\n")
  string(APPEND cpp "template <typename A>\nstruct ${name}Argv {\n")
  string(APPEND cpp "  static constexpr Script kScript = Script::k${name};\n")
  set(list "")
  foreach(arg IN LISTS lua_args)
    string(APPEND cpp "  A ${arg};\n")
    list(APPEND list "${arg}")
  endforeach()
  list(JOIN list ", " list)
  if(lua_tail)
    string(APPEND cpp "  std::vector<std::string> ${lua_tail};  // the variable tail\n")
    string(APPEND cpp "  const std::vector<std::string>& Tail() const { return ${lua_tail}; }\n")
  else()
    string(APPEND cpp "  std::vector<std::string> Tail() const { return {}; }\n")
  endif()
  string(APPEND cpp "  std::array<A, ${argc}> Fixed() const { return {${list}}; }\n};\n\n")
  string(APPEND cpp "// ${script}.lua's reply, by name (its header's REPLY/RETURN lines): views into the\n")
  string(APPEND cpp "// parsed reply, valid while it lives.\nstruct ${name}Reply {\n")
  set(reads "")
  foreach(entry IN LISTS lua_replies lua_reply_tail)
    if(NOT entry)
      continue()
    endif()
    string(REPLACE ":" ";" pair "${entry}")
    list(GET pair 0 field)
    list(GET pair 1 type)
    set(method "")
    if(entry STREQUAL lua_reply_tail)
      string(APPEND cpp "  absl::Span<const redis::RedisReply> ${field};  // every element left\n")
      string(APPEND reads "  r.Rest(\"${field}\", &out->${field});\n")
      continue()
    endif()
    if(type STREQUAL "int")
      string(APPEND cpp "  int64_t ${field} = 0;\n")
      set(method Int)
    elseif(type STREQUAL "str")
      string(APPEND cpp "  absl::string_view ${field};\n")
      set(method Str)
    elseif(type STREQUAL "array")
      string(APPEND cpp "  absl::Span<const redis::RedisReply> ${field};\n")
      set(method Array)
    else()
      string(APPEND cpp "  const redis::RedisReply* ${field} = nullptr;\n")
      set(method Any)
    endif()
    string(APPEND reads "  r.${method}(\"${field}\", &out->${field});\n")
  endforeach()
  list(LENGTH lua_replies fixed)
  set(shape "ReplyReader::Shape::kArray")
  if(lua_scalar)
    set(shape "ReplyReader::Shape::kScalar")
  elseif(lua_reply_tail)
    set(shape "ReplyReader::Shape::kArrayAndTail")
  endif()
  string(APPEND cpp "};\n\n// Parses a reply of ${script}.lua; INTERNAL naming the element when it has another shape.\n")
  string(APPEND cpp "inline absl::Status Parse(const redis::RedisReply& reply, ${name}Reply* out) {\n")
  string(APPEND cpp "  ReplyReader r(reply, \"${script}.lua\", ${fixed}, ${shape});\n${reads}")
  string(APPEND cpp "  return r.status();\n}\n\n")
  set(${out} "${cpp}" PARENT_SCOPE)
endfunction()

# The Lua line that names the arguments: local A = {user = ARGV[1], ...}.
function(orderhold_lua_contract_lua out)
  set(fields "")
  set(n 1)
  foreach(arg IN LISTS lua_args)
    list(APPEND fields "${arg} = ARGV[${n}]")
    math(EXPR n "${n} + 1")
  endforeach()
  if(lua_tail)
    list(APPEND fields "${lua_tail} = {unpack(ARGV, ${n})}")
  endif()
  list(JOIN fields ", " fields)
  set(${out} "local A = {${fields}}\n" PARENT_SCOPE)
endfunction()

set(lua_enum "")
set(lua_specs "")
set(lua_contracts "")
set(lua_shas "")  # "<SHA1 of the EVAL body> <script>" lines (script_shas.txt)
set(lua_index 0)
# The library's code with ORDERHOLD_LIBRARY in place of its name until the hash is known.
set(lua_library "-- OrderHold's store scripts as one Redis Functions library, generated by server/store/lua/scripts.cmake\n-- from server/store/lua/scripts.txt and *.lua. Do not edit.\n${prelude}")
foreach(row IN LISTS lua_table)
  string(REGEX MATCH
    "^([a-z_]+)[ \t]+([0-9]+)[ \t]+([0-9]+)(\\+?)[ \t]+(-|(no-writes|allow-oom)(,(no-writes|allow-oom))*)[ \t]*$"
    matched "${row}")
  if(NOT matched)
    message(FATAL_ERROR "store/lua/scripts.txt: cannot read the line '${row}'")
  endif()
  set(script "${CMAKE_MATCH_1}")
  set(keys "${CMAKE_MATCH_2}")
  set(argv "${CMAKE_MATCH_3}")
  set(more "false")
  set(plus "${CMAKE_MATCH_4}")
  if(plus)
    set(more "true")
  endif()
  # The flags as a Lua list: "no-writes,allow-oom" -> 'no-writes', 'allow-oom'; "-" -> none.
  set(flags "")
  if(NOT CMAKE_MATCH_5 STREQUAL "-")
    string(REPLACE "," "', '" flags "'${CMAKE_MATCH_5}'")
  endif()
  set(path "${ORDERHOLD_LUA_DIR}/${script}.lua")
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${path}")
  file(READ "${path}" content)
  orderhold_lua_contract("${script}" "${content}")
  list(LENGTH lua_args header_argv)
  set(header_plus "")
  if(lua_tail)
    set(header_plus "+")
  endif()
  if(NOT lua_keys EQUAL keys OR NOT header_argv EQUAL argv OR NOT header_plus STREQUAL plus)
    message(FATAL_ERROR "store/lua/${script}.lua documents KEYS[1..${lua_keys}] and "
      "${header_argv}${header_plus} ARGV; store/lua/scripts.txt says ${keys} KEYS and "
      "${argv}${plus} ARGV")
  endif()
  orderhold_lua_camel("${script}" name)
  orderhold_lua_contract_cpp("${script}" "${name}" cpp)
  orderhold_lua_contract_lua(names)
  string(APPEND lua_contracts "${cpp}")
  string(APPEND lua_enum "  k${name} = ${lua_index},\n")
  string(APPEND lua_specs "    {\"${script}\", R\"lua(${prelude}${names}${content})lua\", ${keys}, ${argv}, ${more}, \"ORDERHOLD_LIBRARY_${script}\"},\n")
  string(SHA1 body_sha "${prelude}${names}${content}")
  string(APPEND lua_shas "${body_sha} ${script}\n")
  string(APPEND lua_library "redis.register_function{function_name = 'ORDERHOLD_LIBRARY_${script}', "
    "flags = {${flags}}, callback = function(KEYS, ARGV)\nbegin_call();\n${names}${content}\nend}\n")
  math(EXPR lua_index "${lua_index} + 1")
endforeach()
string(SHA1 lua_library_hash "${lua_library}")
string(SUBSTRING "${lua_library_hash}" 0 12 lua_library_hash)
set(lua_library_name "orderhold_${lua_library_hash}")
string(REPLACE "ORDERHOLD_LIBRARY" "${lua_library_name}" lua_library "${lua_library}")
string(REPLACE "ORDERHOLD_LIBRARY" "${lua_library_name}" lua_specs "${lua_specs}")
set(lua_body "// Generated from server/store/lua/scripts.txt and *.lua by server/store/lua/scripts.cmake. Do not edit.\n")
string(APPEND lua_body "#pragma once\n#include <array>\n#include <cstdint>\n#include <string>\n#include <vector>\n\n")
string(APPEND lua_body "#include \"absl/status/status.h\"\n#include \"absl/strings/string_view.h\"\n#include \"absl/types/span.h\"\n")
string(APPEND lua_body "#include \"server/redis/redis_reply.h\"\n#include \"server/store/script_reply.h\"\n\n")
string(APPEND lua_body "namespace orderhold::store::lua {\n\n")
string(APPEND lua_body "// A script, by its index in kScripts (RedisCommand::script).\nenum class Script : int {\n${lua_enum}};\n\n")
string(APPEND lua_body "// What store/lua/scripts.txt says of a script, and its body (prelude + file).\n")
string(APPEND lua_body "struct ScriptSpec {\n  const char* name;\n  const char* body;\n  int keys;\n  int argv;\n  bool more_argv;  // a variable tail of ARGV after the `argv` fixed ones\n  const char* function;  // its name in kFunctionLibrary (FCALL)\n};\n\n")
string(APPEND lua_body "inline constexpr ScriptSpec kScripts[] = {\n${lua_specs}};\n\n")
string(APPEND lua_body "// Every script as a function of one Redis Functions library (FUNCTION LOAD), the prelude once.\n")
string(APPEND lua_body "inline constexpr char kFunctionLibrary[] = R\"lua(#!lua name=${lua_library_name}\n${lua_library})lua\";\n\n")
string(APPEND lua_body "constexpr const ScriptSpec& Spec(Script script) { return kScripts[static_cast<int>(script)]; }\n\n")
string(APPEND lua_body "${lua_contracts}")
string(APPEND lua_body "}  // namespace orderhold::store::lua\n")
file(CONFIGURE OUTPUT "${ORDERHOLD_LUA_HEADER}" CONTENT "${lua_body}" @ONLY)
# The same library as a file, for FUNCTION LOAD outside the server (tests/bench/run.sh phase 3).
get_filename_component(lua_header_dir "${ORDERHOLD_LUA_HEADER}" DIRECTORY)
file(CONFIGURE OUTPUT "${lua_header_dir}/function_library.lua"
     CONTENT "#!lua name=${lua_library_name}\n${lua_library}" @ONLY)
# Each script's SHA1 as EVALSHA names it (its body: prelude, the table A, the file), for tools that
# attribute Redis' SLOWLOG entries to scripts (tests/bench/run.sh).
file(CONFIGURE OUTPUT "${lua_header_dir}/script_shas.txt" CONTENT "${lua_shas}" @ONLY)
