package monitor

import (
	"os/user"
	"strconv"
	"sync"
)

// userNames memoises uid -> user name lookups ("" when unknown).
var userNames sync.Map

// UserName is the name of user uid ("" when unknown), looked up once per
// uid for the life of the process.
func UserName(uid int) string {
	if v, ok := userNames.Load(uid); ok {
		return v.(string)
	}
	name := ""
	if u, err := user.LookupId(strconv.Itoa(uid)); err == nil {
		name = u.Username
	}
	userNames.Store(uid, name)
	return name
}
